package readable_test

import (
	"testing"

	"github.com/idgen/idgen/readable"
)

// benchID is a typical snowflake-sized ID: 11 base58 digits.
const benchID = int64(1865584123456789012)

func BenchmarkEncode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readable.Encode("order", benchID); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	s, err := readable.Encode("order", benchID)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := readable.Decode(s); err != nil {
			b.Fatal(err)
		}
	}
}
