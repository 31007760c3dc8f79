//go:build !amd64 || purego

package aesblocks

func useAsm() bool { return false }

// encryptBlocksAsm is never called where useAsm is false.
func encryptBlocksAsm(int, *byte, *byte, *byte, int) {
	panic("aesblocks: no assembly in this build")
}

// encryptHalvesAsm is never called where useAsm is false.
func encryptHalvesAsm(int, *byte, *uint64, uint64, uint64, *uint64, int) {
	panic("aesblocks: no assembly in this build")
}
