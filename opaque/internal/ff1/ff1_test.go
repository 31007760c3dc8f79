package ff1_test

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/idgen/idgen/opaque/internal/ff1"
)

const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

func numerals(t *testing.T, s string) []uint16 {
	t.Helper()
	out := make([]uint16, len(s))
	for i, r := range s {
		out[i] = uint16(strings.IndexRune(alphabet, r))
	}
	return out
}

func text(x []uint16) string {
	var b strings.Builder
	for _, d := range x {
		b.WriteByte(alphabet[d])
	}
	return b.String()
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNISTSamples checks the nine FF1 samples NIST publishes for SP
// 800-38G (FF1samples.pdf): AES-128, -192 and -256, radix 10 with and
// without a tweak, and radix 36.
func TestNISTSamples(t *testing.T) {
	const (
		k128 = "2B7E151628AED2A6ABF7158809CF4F3C"
		k192 = k128 + "EF4359D8D580AA4F"
		k256 = k192 + "7F036D6F04FC6A94"
		t0   = ""
		t1   = "39383736353433323130"
		t2   = "3737373770717273373737"
		p10  = "0123456789"
		p36  = "0123456789abcdefghi"
	)
	for _, tc := range []struct {
		name, key, tweak string
		radix            int
		pt, ct           string
	}{
		{"sample1/AES-128/radix10", k128, t0, 10, p10, "2433477484"},
		{"sample2/AES-128/radix10/tweak", k128, t1, 10, p10, "6124200773"},
		{"sample3/AES-128/radix36/tweak", k128, t2, 36, p36, "a9tv40mll9kdu509eum"},
		{"sample4/AES-192/radix10", k192, t0, 10, p10, "2830668132"},
		{"sample5/AES-192/radix10/tweak", k192, t1, 10, p10, "2496655549"},
		{"sample6/AES-192/radix36/tweak", k192, t2, 36, p36, "xbj3kv35jrawxv32ysr"},
		{"sample7/AES-256/radix10", k256, t0, 10, p10, "6657667009"},
		{"sample8/AES-256/radix10/tweak", k256, t1, 10, p10, "1001623463"},
		{"sample9/AES-256/radix36/tweak", k256, t2, 36, p36, "xs8a0azh2avyalyzuwd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ff1.New(unhex(t, tc.key), tc.radix)
			if err != nil {
				t.Fatal(err)
			}
			tweak := unhex(t, tc.tweak)
			ct, err := c.Encrypt(numerals(t, tc.pt), tweak)
			if err != nil {
				t.Fatal(err)
			}
			if got := text(ct); got != tc.ct {
				t.Errorf("Encrypt(%s) = %s, want %s", tc.pt, got, tc.ct)
			}
			pt, err := c.Decrypt(numerals(t, tc.ct), tweak)
			if err != nil {
				t.Fatal(err)
			}
			if got := text(pt); got != tc.pt {
				t.Errorf("Decrypt(%s) = %s, want %s", tc.ct, got, tc.pt)
			}
		})
	}
}

func bitsOf(x uint64, n int) []uint16 {
	out := make([]uint16, n)
	for i := range n {
		out[n-1-i] = uint16(x >> i & 1)
	}
	return out
}

func valueOf(b []uint16) uint64 {
	var x uint64
	for _, d := range b {
		x = x<<1 | uint64(d)
	}
	return x
}

// randomCipher is FF1 in radix 2 under a random key of keyLen bytes.
func randomCipher(t *testing.T, rng *rand.Rand, keyLen int) *ff1.Cipher {
	t.Helper()
	c, err := ff1.New(randomBytes(rng, keyLen), 2)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestUint_MatchesGeneral checks the radix-2 fast path against the general
// algorithm for every width it takes and tweaks of every padding.
func TestUint_MatchesGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, keyLen := range []int{16, 24, 32} {
		c := randomCipher(t, rng, keyLen)
		for bits := 20; bits <= 64; bits++ {
			tweak := randomBytes(rng, rng.IntN(40))
			f, err := c.Uint(bits, tweak)
			if err != nil {
				t.Fatal(err)
			}
			for range 8 {
				x := rng.Uint64()
				if bits < 64 {
					x &= 1<<bits - 1
				}
				want, err := c.Encrypt(bitsOf(x, bits), tweak)
				if err != nil {
					t.Fatal(err)
				}
				got, err := f.Encrypt(x)
				if err != nil {
					t.Fatal(err)
				}
				if got != valueOf(want) {
					t.Fatalf("key %d bytes, %d bits, tweak %d bytes: Uint.Encrypt(%d) = %d, Encrypt = %d", keyLen, bits, len(tweak), x, got, valueOf(want))
				}
				back, err := f.Decrypt(got)
				if err != nil || back != x {
					t.Fatalf("%d bits: Decrypt(Encrypt(%d)) = %d, %v", bits, x, back, err)
				}
			}
		}
	}
}

// TestUint_EncryptNMatchesEncrypt checks the grouped batch path against
// Encrypt, one value at a time, for random values under keys of every
// size, tweaks of every padding, and batches from empty to several groups
// with a partial one at the end. The widths are the smallest, those where
// B changes from 3 to 4 bytes and halves from even to odd, and idgen's
// 63; TestUint_MatchesGeneral covers every width.
func TestUint_EncryptNMatchesEncrypt(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, keyLen := range []int{16, 24, 32} {
		c := randomCipher(t, rng, keyLen)
		for _, bits := range []int{20, 47, 48, 49, 63, 64} {
			for tweakLen := range 17 { // every padding of Q, and one more block
				tweak := randomBytes(rng, tweakLen+rng.IntN(2)*16)
				f, err := c.Uint(bits, tweak)
				if err != nil {
					t.Fatal(err)
				}
				xs := make([]uint64, rng.IntN(200))
				for i := range xs {
					xs[i] = rng.Uint64()
					if bits < 64 {
						xs[i] &= 1<<bits - 1
					}
				}
				want := make([]uint64, len(xs))
				for i, x := range xs {
					if want[i], err = f.Encrypt(x); err != nil {
						t.Fatal(err)
					}
				}
				if err := f.EncryptN(xs); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(xs, want) {
					t.Fatalf("key %d bytes, %d bits, tweak %d bytes, %d values: EncryptN differs from Encrypt", keyLen, bits, len(tweak), len(xs))
				}
			}
		}
	}
	c, _ := ff1.New(make([]byte, 16), 2)
	f, _ := c.Uint(63, nil)
	xs := []uint64{1, 2, 1 << 63}
	if err := f.EncryptN(xs); !errors.Is(err, ff1.ErrNumeral) || !slices.Equal(xs, []uint64{1, 2, 1 << 63}) {
		t.Fatalf("EncryptN with 2^63 in 63 bits: %v, %v; want ErrNumeral and the values unchanged", err, xs)
	}
}

// TestPermutation_Exhaustive encrypts every value of small domains and
// checks that each comes out exactly once and decrypts back.
func TestPermutation_Exhaustive(t *testing.T) {
	key := unhex(t, "000102030405060708090a0b0c0d0e0f")
	for _, tc := range []struct {
		radix, n int
	}{{2, 10}, {2, 11}, {3, 5}, {10, 3}, {36, 2}, {7, 4}} {
		c, err := ff1.NewCipherForTest(key, tc.radix, 2)
		if err != nil {
			t.Fatal(err)
		}
		size := 1
		for range tc.n {
			size *= tc.radix
		}
		seen := make([]bool, size)
		x := make([]uint16, tc.n)
		for v := range size {
			for i, r := 0, v; i < tc.n; i++ {
				x[tc.n-1-i] = uint16(r % tc.radix)
				r /= tc.radix
			}
			ct, err := c.Encrypt(x, []byte("order"))
			if err != nil {
				t.Fatal(err)
			}
			w := 0
			for _, d := range ct {
				w = w*tc.radix + int(d)
			}
			if seen[w] {
				t.Fatalf("radix %d, %d numerals: %v encrypts to a value already taken", tc.radix, tc.n, x)
			}
			seen[w] = true
			pt, err := c.Decrypt(ct, []byte("order"))
			if err != nil || !slices.Equal(pt, x) {
				t.Fatalf("radix %d: Decrypt(Encrypt(%v)) = %v, %v", tc.radix, x, pt, err)
			}
		}
	}
}

// TestUint_ExhaustiveAtMinimumDomain checks the fast path as a permutation
// on the smallest domain New accepts for radix 2: all 2^20 values.
func TestUint_ExhaustiveAtMinimumDomain(t *testing.T) {
	c, err := ff1.New(unhex(t, "2B7E151628AED2A6ABF7158809CF4F3C"), 2)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Uint(20, []byte("invoice"))
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, 1<<20)
	for x := range uint64(1 << 20) {
		y, err := f.Encrypt(x)
		if err != nil {
			t.Fatal(err)
		}
		if seen[y] {
			t.Fatalf("%d encrypts to %d, already taken", x, y)
		}
		seen[y] = true
	}
}

func TestErrors(t *testing.T) {
	key := make([]byte, 16)
	if _, err := ff1.New(make([]byte, 15), 10); !errors.Is(err, ff1.ErrKey) {
		t.Errorf("15-byte key: %v, want ErrKey", err)
	}
	for _, radix := range []int{0, 1, 1<<16 + 1} {
		if _, err := ff1.New(key, radix); !errors.Is(err, ff1.ErrRadix) {
			t.Errorf("radix %d: %v, want ErrRadix", radix, err)
		}
	}
	c10, _ := ff1.New(key, 10)
	if _, err := c10.Encrypt(make([]uint16, 5), nil); !errors.Is(err, ff1.ErrLength) {
		t.Errorf("10^5 values: %v, want ErrLength (below a million)", err)
	}
	if _, err := c10.Encrypt([]uint16{1, 2, 3, 4, 5, 10}, nil); !errors.Is(err, ff1.ErrNumeral) {
		t.Errorf("numeral 10 in radix 10: %v, want ErrNumeral", err)
	}
	if _, err := c10.Encrypt(make([]uint16, 6), make([]byte, ff1.MaxTweak+1)); !errors.Is(err, ff1.ErrTweak) {
		t.Errorf("long tweak: %v, want ErrTweak", err)
	}
	if _, err := c10.Uint(63, nil); !errors.Is(err, ff1.ErrRadix) {
		t.Errorf("Uint on radix 10: %v, want ErrRadix", err)
	}
	c2, _ := ff1.New(key, 2)
	for _, bits := range []int{19, 65} {
		if _, err := c2.Uint(bits, nil); !errors.Is(err, ff1.ErrLength) {
			t.Errorf("Uint(%d): %v, want ErrLength", bits, err)
		}
	}
	f, _ := c2.Uint(63, nil)
	if _, err := f.Encrypt(1 << 63); !errors.Is(err, ff1.ErrNumeral) {
		t.Errorf("2^63 in 63 bits: %v, want ErrNumeral", err)
	}
}
