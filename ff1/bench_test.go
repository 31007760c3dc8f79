package ff1_test

import (
	"testing"

	"github.com/idgen/idgen/ff1"
)

func BenchmarkUint_Encrypt63(b *testing.B) {
	c, _ := ff1.New(make([]byte, 16), 2)
	f, _ := c.Uint(63, []byte("order"))
	var x uint64
	for i := 0; b.Loop(); i++ {
		x, _ = f.Encrypt(uint64(i))
	}
	_ = x
}

func BenchmarkCipher_Encrypt63(b *testing.B) {
	c, _ := ff1.New(make([]byte, 16), 2)
	x := make([]uint16, 63)
	for b.Loop() {
		_, _ = c.Encrypt(x, []byte("order"))
	}
}
