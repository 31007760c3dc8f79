//go:build amd64 && !purego

package aesblocks

import "golang.org/x/sys/cpu"

func useAsm() bool { return cpu.X86.HasAES }

// encryptBlocksAsm encrypts n blocks from src into dst with the expanded
// key xk of rounds rounds, eight blocks per pass and the rest one by one.
//
//go:noescape
func encryptBlocksAsm(rounds int, xk *byte, dst, src *byte, n int)
