// Package readable writes IDs for people: in logs, support tickets, URLs
// and on the phone. A bare 64-bit number such as 9007199254740993 says
// neither what it identifies nor whether it was copied right, and
// mistyping one digit silently names another order. A readable ID says
// both:
//
//	order_BukQL3x
//
// is the tag "order", a '_', the ID 123456789 in base58, and two check
// characters.
//
// # Format
//
// The tag is any idgen tag (1 to 64 characters of [A-Za-z0-9_.:-]), so it
// may contain '_' itself; the number and the check characters never do,
// and Decode splits at the last '_'. The number is written in base58 with
// the Bitcoin alphabet, which leaves out 0, O, I and l, most significant
// digit first, without leading zero digits: 0 is "1". A readable ID is at
// most MaxLen (78) ASCII characters and needs no escaping in a URL path or
// query, in JSON or in a log line.
//
// # Check characters
//
// The two check characters make the position-weighted sum of all
// characters a multiple of the prime 113, so Decode rejects, with
// certainty:
//
//   - any single character replaced by another, in the tag, the separator,
//     the number or the check characters;
//   - any two different characters swapped, adjacent or not.
//
// Other damage (a character dropped or added, several mistakes at once) is
// caught about 112 times in 113. The check is against mistakes, not
// forgery: anyone can compute it, so a readable ID proves nothing about
// who made it and must be authorized like the number it stands for. The
// proof is in checksum.go.
//
// # Strictness
//
// Decode accepts exactly what Encode writes: for every s it accepts,
// Encode(Decode(s)) == s. There is one readable ID per tag and number, so
// readable IDs may be compared as strings. Nothing is case-folded, trimmed
// or repaired; every error matches ErrInvalid and says what is wrong.
package readable
