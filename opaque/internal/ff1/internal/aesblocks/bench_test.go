package aesblocks

import (
	"crypto/aes"
	"strconv"
	"testing"
)

// BenchmarkEncryptAdd is the cost of a round over n values, beside
// crypto/aes one block at a time: ns/op divided by n is the cost of one
// block in a batch.
func BenchmarkEncryptAdd(b *testing.B) {
	key := make([]byte, 16)
	for _, n := range []int{1, 16, 64} {
		buf := make([]byte, n*BlockSize)
		b.Run("crypto-aes/"+strconv.Itoa(n), func(b *testing.B) {
			std, _ := aes.NewCipher(key)
			for b.Loop() {
				for i := 0; i < len(buf); i += BlockSize {
					std.Encrypt(buf[i:], buf[i:])
				}
			}
		})
		x, acc := make([]uint64, n), make([]uint64, n)
		b.Run("add/"+strconv.Itoa(n), func(b *testing.B) {
			blk, _ := New(key)
			for b.Loop() {
				blk.EncryptAdd(acc, 1<<31-1, 1, 2, x)
			}
		})
	}
}
