package readable

import (
	"math"
	"strings"

	"github.com/idgen/idgen"
)

// alphabet holds the base58 digits in order of value: the Bitcoin
// alphabet, which leaves out 0, O, I and l because they are easily
// confused.
const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

const (
	maxTagLen     = 64 // as idgen.CheckTag allows
	maxPayloadLen = 11 // base58 digits of math.MaxInt64: 58^10 < 2^63 ≤ 58^11
	checkLen      = 2  // check characters after the payload

	// MaxLen is the length in bytes of the longest readable ID: a 64
	// character tag, the separator, 11 base58 digits and 2 check
	// characters. Every readable ID is ASCII, so this is also its length
	// in characters; size database columns and buffers by it.
	MaxLen = maxTagLen + 1 + maxPayloadLen + checkLen
)

// digitOf maps a byte to its base58 value, or -1 if it is not a base58
// digit.
var digitOf = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = int8(i)
	}
	return t
}()

// Encode returns the readable form of id under tag:
//
//	<tag>_<base58 digits of id><2 check characters>
//
// for example "order_BukQL3x" for tag "order" and ID 123456789. The
// check characters make Decode reject any single mistyped character and
// any two swapped characters, in the tag as well as in the number.
//
// Encode returns an error matching ErrInvalidTag if tag is not 1 to 64
// characters of [A-Za-z0-9_.:-] (see idgen.CheckTag), and ErrNegativeID if
// id is below zero. The result is at most MaxLen bytes long.
func Encode(tag string, id int64) (string, error) {
	if err := idgen.CheckTag(tag); err != nil {
		return "", err
	}
	if id < 0 {
		return "", negativeID(id)
	}
	var digits [maxPayloadLen]byte
	i := len(digits)
	for u := uint64(id); ; {
		i--
		digits[i] = alphabet[u%58]
		u /= 58
		if u == 0 {
			break
		}
	}
	var buf [MaxLen]byte
	n := copy(buf[:], tag)
	buf[n] = '_'
	n++
	n += copy(buf[n:], digits[i:])
	buf[n], buf[n+1] = checkChars(weightedSum(buf[:n]), n)
	return string(buf[:n+checkLen]), nil
}

// Decode parses a readable ID written by Encode and returns its tag and
// ID. The tag is everything before the last '_', since tags may contain
// '_' themselves but the base58 digits and check characters never do.
//
// Decode is strict: it accepts exactly the strings Encode returns, so
// Encode(Decode(s)) == s whenever Decode succeeds. Every other input gets
// an error matching ErrInvalid, whose message says which rule it breaks,
// checked in this order:
//
//   - longer than MaxLen bytes;
//   - no '_' separator;
//   - the tag is not 1 to 64 characters of [A-Za-z0-9_.:-];
//   - fewer than 3 characters after the separator (a number needs at
//     least one digit, and then come the 2 check characters);
//   - a character after the separator that is not a base58 digit;
//   - the check characters do not match ("bad checksum"): the reply to a
//     typo or a swap of two characters, wherever it happened;
//   - the number has leading zero digits ('1' in base58), which Encode
//     never writes: 0 is "1", and 5 is "6", never "16";
//   - the number is larger than math.MaxInt64.
//
// Letters are never case-folded: base58 and tags are case-sensitive.
func Decode(s string) (tag string, id int64, err error) {
	if len(s) > MaxLen {
		return "", 0, invalid("%d bytes long, more than the %d of the longest readable ID", len(s), MaxLen)
	}
	sep := strings.LastIndexByte(s, '_')
	if sep < 0 {
		return "", 0, invalid("no '_' between tag and number in %q", s)
	}
	tag, rest := s[:sep], s[sep+1:]
	if !idgen.ValidTag(tag) {
		return "", 0, invalid("tag %q is not 1 to 64 characters of A-Z a-z 0-9 _ . : -", tag)
	}
	if len(rest) < 1+checkLen {
		return "", 0, invalid("%q after the last '_' is too short for a number and %d check characters", rest, checkLen)
	}
	for i := 0; i < len(rest); i++ {
		if digitOf[rest[i]] < 0 {
			return "", 0, invalid("%q at offset %d is not a base58 character (1-9 A-Z a-z without 0 I O l)", s[sep+1+i:sep+2+i], sep+1+i)
		}
	}
	body := len(s) - checkLen
	if c0, c1 := checkChars(weightedSum(s[:body]), body); s[body] != c0 || s[body+1] != c1 {
		return "", 0, invalid("bad checksum: look for a mistyped character or two swapped ones")
	}
	payload := rest[:len(rest)-checkLen]
	if len(payload) > 1 && payload[0] == alphabet[0] {
		return "", 0, invalid("number %q has a leading zero digit '1'", payload)
	}
	if len(payload) > maxPayloadLen {
		return "", 0, invalid("number %q is larger than the largest int64", payload)
	}
	for i := 0; i < len(payload); i++ {
		d := int64(digitOf[payload[i]])
		if id > (math.MaxInt64-d)/58 {
			return "", 0, invalid("number %q is larger than the largest int64", payload)
		}
		id = id*58 + d
	}
	return tag, id, nil
}
