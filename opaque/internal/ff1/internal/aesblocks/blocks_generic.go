//go:build !amd64 || purego

package aesblocks

func useAsm() bool { return false }

func useVAES() bool { return false }

// encryptBlockAsm is never called where useAsm is false.
func encryptBlockAsm(int, *byte, *byte, *byte) {
	panic("aesblocks: no assembly in this build")
}

// encryptAddAsm is never called where useAsm is false.
func encryptAddAsm(int, *byte, *uint64, uint64, uint64, uint64, *uint64, int) {
	panic("aesblocks: no assembly in this build")
}

// encryptAddVAES is never called where useVAES is false.
func encryptAddVAES(int, *byte, *uint64, uint64, uint64, uint64, *uint64, int) {
	panic("aesblocks: no assembly in this build")
}
