// Package aesblocks runs AES over many independent blocks at once, in the
// shape of FF1's rounds: what FF1 needs when it takes the same round over
// a batch of values.
//
// # Why a package of its own
//
// One AES block through crypto/aes costs about 20 ns here, nearly all of it
// the latency of ten dependent AESENC instructions: each round waits for
// the one before. Blocks of different values do not depend on each other,
// so eight or sixteen of them in flight keep the AES unit busy and cost
// little more than one. The standard library has no API for that:
// cipher.Block takes one block, and its multi-block modes (CTR, GCM)
// encrypt counters, not blocks of the caller's choosing.
//
// So this package holds the key schedule itself, and Block.EncryptAdd
// does one FF1 round (radix 2, at most 64 bits) over many values: it builds
// each value's block from integers, encrypts, and adds the result into the
// other half, all in assembly on amd64, where packing blocks in Go would
// cost more than the encryption. With VAES (and AVX-512, which is when
// golang.org/x/sys/cpu reports VAES) it takes sixteen blocks per pass on
// 256-bit registers; with AES-NI alone, eight (AESENC and AESENCLAST, ten,
// twelve or fourteen rounds for AES-128, -192 and -256). The key expansion
// is written in Go from FIPS-197 §5.2, the S-box computed from its
// definition (the inverse in GF(2^8) and the affine map) rather than a
// table. Everywhere else (other architectures, a CPU without AES-NI, or
// the purego build tag), every block goes through crypto/aes, which is
// correct and as fast as one block at a time can be.
//
// CPU features come from golang.org/x/sys/cpu (cpu.X86.HasAES, HasSSSE3,
// HasAVX2, HasAVX512VAES), read once per key: crypto/aes does not say
// whether it uses the instructions.
//
// The assembly only encrypts; it never decrypts, and it does not touch the
// key schedule, so a bug in it shows as a wrong block, which the tests
// compare against crypto/aes on every path and key size.
package aesblocks
