// Package ff1 implements FF1, the format-preserving encryption mode of
// NIST SP 800-38G (Revision 1, and the one mode its 2025 revision keeps),
// over AES from the standard library.
//
// Format-preserving encryption maps a string of n numerals in some radix
// to another string of n numerals in the same radix, one to one, under a
// key and a tweak. idgen uses it with radix 2 over 63 bits to turn a
// counter into a positive int64 that says nothing about how many IDs came
// before it: a keyed permutation of the ID space, not a hash, so two
// counters never map to the same value.
//
// # Why a package of its own
//
// FF1 is short, but easy to get subtly wrong, and no maintained Go module
// for it could be used here (the best known one is archived). So it is
// written once, small, against the standard: the general algorithm
// (Cipher.Encrypt and Decrypt, on numeral strings of any radix from 2 to
// 2^16) is checked against all nine of NIST's published FF1 samples, and
// the fast path idgen uses (Uint, radix 2 on a uint64, one AES call per
// round) is checked against the general algorithm.
//
// # Batches
//
// One value's ten rounds are ten AES calls, each waiting for the one
// before: about 20 ns each, nearly all of it the latency of the AES
// instructions. The rounds of different values do not depend on each
// other, so Uint.EncryptN takes 64 values through each round together,
// sixteen AES blocks in flight (package internal/aesblocks: VAES or
// AES-NI assembly on amd64, crypto/aes elsewhere), for about 25 ns a
// value instead of about 300; it is checked against Encrypt, value by
// value.
//
// # What it does not promise
//
// FF1's security rests on a domain of at least a million values (NIST's
// bound, which New enforces) and on the key staying secret. It hides the
// order and the density of the values it encrypts from anyone without the
// key; it is not authentication: a guessed value decrypts to some counter
// just as a real one does.
package ff1
