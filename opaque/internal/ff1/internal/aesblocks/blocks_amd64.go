//go:build amd64 && !purego

package aesblocks

import "golang.org/x/sys/cpu"

// useAsm: the assembly needs AES-NI, and SSSE3 for PSHUFB; every CPU
// with the first has the second, but asking costs nothing.
func useAsm() bool { return cpu.X86.HasAES && cpu.X86.HasSSSE3 }

// useVAES: the 256-bit path needs VAES and AVX2. x/sys/cpu reports VAES
// only beside AVX-512 (HasAVX512VAES), so CPUs with VAES and no AVX-512
// take the AES-NI path, which is correct and half as fast.
func useVAES() bool { return useAsm() && cpu.X86.HasAVX512VAES && cpu.X86.HasAVX2 }

// encryptBlockAsm encrypts the block at src into dst with the expanded
// key xk of rounds rounds.
//
//go:noescape
func encryptBlockAsm(rounds int, xk *byte, dst, src *byte)

// encryptAddAsm is EncryptAdd over n values of x, eight per pass.
//
//go:noescape
func encryptAddAsm(rounds int, xk *byte, acc *uint64, mask, hi, lo uint64, x *uint64, n int)

// encryptAddVAES is encryptAddAsm with VAES on 256-bit registers,
// sixteen blocks in flight, for n a multiple of 16.
//
//go:noescape
func encryptAddVAES(rounds int, xk *byte, acc *uint64, mask, hi, lo uint64, x *uint64, n int)
