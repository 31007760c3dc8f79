package opaque_test

import "testing"

// BenchmarkEncode is the in-process cost of one opaque ID, beside
// BenchmarkPlain, the floor of taking a counter as it is.
func BenchmarkEncode(b *testing.B) {
	k := testKey(b)
	var id int64
	for i := int64(1); b.Loop(); i++ {
		id, _ = k.Encode("order", i)
	}
	_ = id
}

func BenchmarkPlain(b *testing.B) {
	var id int64
	for i := int64(1); b.Loop(); i++ {
		id = i
	}
	_ = id
}
