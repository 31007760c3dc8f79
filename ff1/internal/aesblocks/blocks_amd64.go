//go:build amd64 && !purego

package aesblocks

import "golang.org/x/sys/cpu"

// useAsm: the assembly needs AES-NI, and SSSE3 for PSHUFB; every CPU
// with the first has the second, but asking costs nothing.
func useAsm() bool { return cpu.X86.HasAES && cpu.X86.HasSSSE3 }

// encryptBlocksAsm encrypts n blocks from src into dst with the expanded
// key xk of rounds rounds, eight blocks per pass and the rest one by one.
//
//go:noescape
func encryptBlocksAsm(rounds int, xk *byte, dst, src *byte, n int)

// encryptHalvesAsm is EncryptHalves over n values of x, eight per pass.
//
//go:noescape
func encryptHalvesAsm(rounds int, xk *byte, out *uint64, hi, lo uint64, x *uint64, n int)
