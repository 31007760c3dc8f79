package opaque_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/idgen/idgen/opaque"
)

func testKey(t testing.TB) *opaque.Key {
	t.Helper()
	k, err := opaque.ParseKey("000102030405060708090a0b0c0d0e0f")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestEncode_MillionCounters encrypts 1,000,000 sequential counters: all
// distinct positive values, decoding back, and with a rank correlation to
// the counter within ±0.01.
func TestEncode_MillionCounters(t *testing.T) {
	const n = 1_000_000
	k := testKey(t)
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	if err := k.EncodeN("order", ids); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if id < 1 {
			t.Fatalf("Encode(%d) = %d, not positive", i+1, id)
		}
	}
	for _, i := range []int{0, 1, n / 2, n - 1} {
		if c, err := k.Decode("order", ids[i]); err != nil || c != int64(i+1) {
			t.Fatalf("Decode(Encode(%d)) = %d, %v", i+1, c, err)
		}
	}
	// Spearman's rho between counter order and ID order: the counter's
	// rank is its index, the ID's rank its place in sorted order.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(sign(ids[a] - ids[b])) })
	var d2 float64
	for rank, i := range order {
		if rank > 0 && ids[order[rank-1]] == ids[i] {
			t.Fatalf("counters %d and %d both encode to %d", order[rank-1]+1, i+1, ids[i])
		}
		d := float64(rank - i)
		d2 += d * d
	}
	rho := 1 - 6*d2/(float64(n)*(float64(n)*float64(n)-1))
	t.Logf("rank correlation of %d sequential counters and their IDs: %.5f", n, rho)
	if math.Abs(rho) > 0.01 {
		t.Errorf("rank correlation %.5f, want within ±0.01", rho)
	}
}

func sign(x int64) int64 {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func TestEncode_TagIsTheTweak(t *testing.T) {
	k := testKey(t)
	a, _ := k.Encode("order", 42)
	b, _ := k.Encode("invoice", 42)
	if a == b {
		t.Errorf("counter 42 encodes to %d in both tags", a)
	}
}

func TestEncode_Edges(t *testing.T) {
	k := testKey(t)
	for _, c := range []int64{1, 2, math.MaxInt64 - 1, math.MaxInt64} {
		id, err := k.Encode("t", c)
		if err != nil || id < 1 {
			t.Fatalf("Encode(%d) = %d, %v", c, id, err)
		}
		back, err := k.Decode("t", id)
		if err != nil || back != c {
			t.Fatalf("Decode(Encode(%d)) = %d, %v", c, back, err)
		}
	}
	for _, bad := range []int64{0, -1, math.MinInt64} {
		if _, err := k.Encode("t", bad); !errors.Is(err, opaque.ErrRange) {
			t.Errorf("Encode(%d): %v, want ErrRange", bad, err)
		}
		if _, err := k.Decode("t", bad); !errors.Is(err, opaque.ErrRange) {
			t.Errorf("Decode(%d): %v, want ErrRange", bad, err)
		}
	}
}

func TestParseKey(t *testing.T) {
	hexKey := "000102030405060708090a0b0c0d0e0f"
	b64Key := "AAECAwQFBgcICQoLDA0ODw==" // the same 16 bytes
	for _, tc := range []struct {
		in   string
		ok   bool
		name string
	}{
		{hexKey, true, "hex 16 bytes"},
		{" " + hexKey + "\n", true, "hex with white space (a key file)"},
		{b64Key, true, "base64 16 bytes"},
		{hexKey + "0001020304050607", true, "hex 24 bytes"},
		{hexKey + hexKey, true, "hex 32 bytes"},
		{"00010203", false, "hex 4 bytes"},
		{"not a key", false, "neither"},
		{"", false, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := opaque.ParseKey(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseKey(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
			if err != nil && !errors.Is(err, opaque.ErrKey) {
				t.Fatalf("ParseKey(%q) = %v, want ErrKey", tc.in, err)
			}
		})
	}
	a, _ := opaque.ParseKey(hexKey)
	b, _ := opaque.ParseKey(b64Key)
	c, _ := opaque.ParseKey("0f0e0d0c0b0a09080706050403020100")
	if a.Fingerprint() != b.Fingerprint() || a.Fingerprint() == c.Fingerprint() {
		t.Errorf("fingerprints: hex %s, base64 %s (want equal), other %s (want different)", a.Fingerprint(), b.Fingerprint(), c.Fingerprint())
	}
}

func TestEncodeN_MatchesEncode(t *testing.T) {
	k := testKey(t)
	ids := []int64{1, 2, 3, 1000, math.MaxInt64}
	for i := range 20000 { // past the batch size that spreads over the cores
		ids = append(ids, int64(i+5000))
	}
	want := make([]int64, len(ids))
	for i, c := range ids {
		want[i], _ = k.Encode("order", c)
	}
	if err := k.EncodeN("order", ids); err != nil || !slices.Equal(ids, want) {
		t.Fatalf("EncodeN = %v, %v; want %v", ids, err, want)
	}
	if err := k.EncodeN("order", []int64{5, 0}); !errors.Is(err, opaque.ErrRange) {
		t.Fatalf("EncodeN with a 0: %v, want ErrRange", err)
	}
}
