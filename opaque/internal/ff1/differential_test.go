package ff1_test

import (
	"math/rand/v2"
	"testing"

	"github.com/idgen/idgen/opaque/internal/ff1"
)

// reference is the general algorithm, Cipher.Encrypt over numeral
// strings with big-integer arithmetic, on the bits of x: what the fast
// path must compute.
func reference(t testing.TB, c *ff1.Cipher, bits int, tweak []byte, x uint64) uint64 {
	t.Helper()
	y, err := c.Encrypt(bitsOf(x, bits), tweak)
	if err != nil {
		t.Fatal(err)
	}
	return valueOf(y)
}

// batch is one kind of input EncryptN takes: random values, or counters
// in a row from some start, which take round 0 from AES in counter mode.
func batch(rng *rand.Rand, bits int) (kind string, xs []uint64) {
	top := uint64(1)<<bits - 1
	if bits == 64 {
		top = ^uint64(0)
	}
	n := 1 + rng.IntN(200)
	xs = make([]uint64, n)
	var start uint64
	switch k := rng.IntN(6); k {
	case 0:
		for i := range xs {
			xs[i] = rng.Uint64() & top
		}
		return "random", xs
	case 1: // a segment's counters, anywhere
		start = rng.Uint64() & top
	case 2: // across a multiple of 64, where a run of keystream ends
		start = (rng.Uint64()&top)&^63 + 64 - uint64(1+rng.IntN(63))
	case 3: // across the top of the low half, where the halves wrap
		v := uint(bits - bits/2)
		start = (rng.Uint64()&top)&^(1<<v-1) + 1<<v - uint64(1+rng.IntN(100))
	case 4: // a young tag
		start = uint64(1 + rng.IntN(1000))
	default: // at the top of the domain, wrapping to 0
		start = top - uint64(rng.IntN(100))
	}
	for i := range xs {
		xs[i] = (start + uint64(i)) & top
	}
	return "consecutive", xs
}

// TestUint_EncryptNMatchesReference is the differential test of the fast
// path: EncryptN, with its grouped rounds and round 0 from counter mode,
// against the general algorithm value by value, over random keys of
// every size, tweaks of every padding and batches of random values and
// of counters in a row that start anywhere, cross multiples of 64 and
// wrap the low half or the domain.
func TestUint_EncryptNMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	checked := 0
	for round := range 200 {
		keyLen := []int{16, 24, 32}[round%3]
		c := randomCipher(t, rng, keyLen)
		bits := []int{20, 31, 47, 48, 63, 64}[rng.IntN(6)]
		tweak := randomBytes(rng, rng.IntN(34))
		f, err := c.Uint(bits, tweak)
		if err != nil {
			t.Fatal(err)
		}
		kind, xs := batch(rng, bits)
		in := append([]uint64(nil), xs...)
		if err := f.EncryptN(xs); err != nil {
			t.Fatal(err)
		}
		for i, x := range in {
			if want := reference(t, c, bits, tweak, x); xs[i] != want {
				t.Fatalf("key %d bytes, %d bits, tweak %d bytes, %s batch of %d from %d: EncryptN gives %d for %d at %d, the general algorithm %d",
					keyLen, bits, len(tweak), kind, len(in), in[0], xs[i], x, i, want)
			}
			checked++
		}
	}
	t.Logf("%d values checked against the general algorithm", checked)
}

// FuzzUint_EncryptN checks EncryptN on a run of counters from any start,
// and one value changed anywhere in it, against Encrypt (itself checked
// against the general algorithm by TestUint_MatchesGeneral).
func FuzzUint_EncryptN(f *testing.F) {
	f.Add(uint64(1), uint16(64), uint16(0), uint64(0), []byte("order"))
	f.Add(uint64(1<<32-3), uint16(130), uint16(7), uint64(5), []byte{})
	f.Add(uint64(1<<63-10), uint16(20), uint16(19), uint64(1), []byte("a tweak of more than one block"))
	f.Fuzz(func(t *testing.T, start uint64, n, at uint16, other uint64, tweak []byte) {
		if len(tweak) > 64 {
			tweak = tweak[:64]
		}
		c, err := ff1.New(make([]byte, 32), 2)
		if err != nil {
			t.Fatal(err)
		}
		u, err := c.Uint(63, tweak)
		if err != nil {
			t.Fatal(err)
		}
		xs := make([]uint64, 1+int(n)%512)
		for i := range xs {
			xs[i] = (start + uint64(i)) & (1<<63 - 1)
		}
		if other != 0 {
			xs[int(at)%len(xs)] = other & (1<<63 - 1)
		}
		in := append([]uint64(nil), xs...)
		if err := u.EncryptN(xs); err != nil {
			t.Fatal(err)
		}
		for i, x := range in {
			want, err := u.Encrypt(x)
			if err != nil {
				t.Fatal(err)
			}
			if xs[i] != want {
				t.Fatalf("EncryptN gives %d for %d at %d of %d, Encrypt %d", xs[i], x, i, len(in), want)
			}
		}
	})
}
