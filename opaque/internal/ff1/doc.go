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
// 2^16) is checked against all nine of NIST's published FF1 samples and
// Zcash's four radix-2 vectors, and the fast path idgen uses (Uint, radix
// 2 on a uint64, one AES call per round) against the general algorithm
// and against a table of 63-bit known answers that an independent FF1
// made (testdata/ff1ref.py, over OpenSSL's AES).
//
// # AES
//
// Every AES block goes through the standard library's crypto/aes, as a
// cipher.Block: no key schedule, no assembly and no other cipher code of
// this package's own. crypto/aes uses the CPU's AES instructions where it
// has them (AES-NI on amd64, the ARMv8 AES extension on arm64, POWER8 and
// later); elsewhere it runs in software, several times slower, and idgen
// serve says so at start.
//
// # Batches
//
// One value's ten rounds are ten AES calls, each waiting for the one
// before, so one value at a time runs at the latency of the AES
// instructions. The rounds of different values do not depend on each
// other, so Uint.EncryptN takes 64 values through each round together:
// the blocks of a round are packed in one loop, encrypted in a run of
// independent crypto/aes calls that the CPU overlaps, and added into the
// other halves in a third: about 0.11 µs of CPU a value in a batch of
// 10,000 against 0.31 µs one at a time (BenchmarkUint_EncryptN63 and
// BenchmarkUint_Encrypt63). It is checked against Encrypt, value by
// value, and against the general algorithm over random batches and runs
// of counters (TestUint_EncryptNMatchesReference, FuzzUint_EncryptN).
//
// Round 0 of counters in a row could come from AES in counter mode: its
// inputs, hi || lo⊕B for B in a row, are every block of an aligned run,
// which crypto/cipher's CTR encrypts eight at a time for about 3 ns a
// block against about 10 ns one by one. Measured, it was 27% slower
// (2026-12-02, benchstat of 10 runs): crypto/cipher.NewCTR copies the
// whole AES key schedule into every stream it makes, about 0.5 µs, and a
// stream cannot be moved to another IV, so a run of 64 blocks pays more
// for its stream than it saves; a round is one call of cipher.Block
// per value.
//
// # What it does not promise
//
// FF1's security rests on a domain of at least a million values (NIST's
// bound, which New enforces) and on the key staying secret. It hides the
// order and the density of the values it encrypts from anyone without the
// key; it is not authentication: a guessed value decrypts to some counter
// just as a real one does.
package ff1
