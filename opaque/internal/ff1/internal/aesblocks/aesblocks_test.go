package aesblocks

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"testing"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// paths are the ways a Block encrypts on this machine and build: always
// crypto/aes's, then AES-NI and VAES where the CPU has them and the
// purego tag is not set.
func paths(t *testing.T) []path {
	t.Helper()
	ps := []path{pathStd}
	if useAsm() {
		ps = append(ps, pathAsm)
	}
	if useVAES() {
		ps = append(ps, pathVAES)
	}
	if len(ps) < 3 {
		t.Logf("paths tested here: %v (AES-NI and VAES assembly need the CPU and a build without purego)", ps)
	}
	return ps
}

func name(p path) string { return p.String() }

// TestFIPS197 checks the example vectors of FIPS-197 Appendix C, one per
// key size.
func TestFIPS197(t *testing.T) {
	const pt = "00112233445566778899aabbccddeeff"
	for _, tc := range []struct{ name, key, ct string }{
		{"C.1/AES-128", "000102030405060708090a0b0c0d0e0f", "69c4e0d86a7b0430d8cdb78070b4c55a"},
		{"C.2/AES-192", "000102030405060708090a0b0c0d0e0f1011121314151617", "dda97ca4864cdfe06eaf70a0ec0d7191"},
		{"C.3/AES-256", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "8ea2b7ca516745bfeafc49904b496089"},
	} {
		for _, p := range paths(t) {
			t.Run(tc.name+"/"+name(p), func(t *testing.T) {
				b, err := newBlock(unhex(t, tc.key), p)
				if err != nil {
					t.Fatal(err)
				}
				want := unhex(t, tc.ct)
				got := make([]byte, 16)
				b.Encrypt(got, unhex(t, pt))
				if !bytes.Equal(got, want) {
					t.Fatalf("Encrypt = %x, want %x", got, want)
				}
				b.Encrypt(got, unhex(t, pt)[:16])
				b.Encrypt(got, got) // in place: the encryption of the ciphertext
				std, _ := aes.NewCipher(unhex(t, tc.key))
				std.Encrypt(want, want)
				if !bytes.Equal(got, want) {
					t.Fatalf("Encrypt in place = %x, want %x", got, want)
				}
			})
		}
	}
}

// TestKeyExpansion checks the last word of each key schedule of FIPS-197
// Appendix A, and the first words, which are the key.
func TestKeyExpansion(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		last      uint32
	}{
		{"A.1/AES-128", "2b7e151628aed2a6abf7158809cf4f3c", 0xb6630ca6},
		{"A.2/AES-192", "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b", 0x01002202},
		{"A.3/AES-256", "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", 0x706c631e},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := unhex(t, tc.key)
			b, err := New(key)
			if err != nil {
				t.Fatal(err)
			}
			n := (b.rounds + 1) * BlockSize
			if got := binary.BigEndian.Uint32(b.enc[n-4:]); got != tc.last {
				t.Errorf("last word = %08x, want %08x", got, tc.last)
			}
			if !bytes.Equal(b.enc[:len(key)], key) {
				t.Errorf("schedule starts %x, want the key %x", b.enc[:len(key)], key)
			}
		})
	}
}

// TestSbox checks the S-box against FIPS-197's own examples (§5.1.1:
// {53} → {ed}; Figure 7's first entries) and that it is a permutation.
func TestSbox(t *testing.T) {
	for in, want := range map[byte]byte{0x00: 0x63, 0x01: 0x7c, 0x53: 0xed, 0xff: 0x16} {
		if got := sbox(in); got != want {
			t.Errorf("sbox(%02x) = %02x, want %02x", in, got, want)
		}
	}
	var seen [256]bool
	for i := range 256 {
		s := sbox(byte(i))
		if seen[s] {
			t.Fatalf("sbox maps two bytes to %02x", s)
		}
		seen[s] = true
	}
}

// eachRandomKey runs f on 200 random keys of every size, through every
// path the machine has, beside crypto/aes under the same key.
func eachRandomKey(t *testing.T, seed uint64, f func(t *testing.T, rng *rand.Rand, key []byte, b *Block, std cipher.Block)) {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for _, size := range []int{16, 24, 32} {
		for _, p := range paths(t) {
			t.Run(name(p)+"/"+map[int]string{16: "AES-128", 24: "AES-192", 32: "AES-256"}[size], func(t *testing.T) {
				for range 200 {
					key := make([]byte, size)
					fill(rng, key)
					b, err := newBlock(key, p)
					if err != nil {
						t.Fatal(err)
					}
					std, _ := aes.NewCipher(key)
					f(t, rng, key, b, std)
				}
			})
		}
	}
}

// TestMatchesCryptoAES encrypts random blocks under random keys of every
// size, in place and not, and compares them with crypto/aes.
func TestMatchesCryptoAES(t *testing.T) {
	eachRandomKey(t, 1, func(t *testing.T, rng *rand.Rand, key []byte, b *Block, std cipher.Block) {
		src, want, got := make([]byte, 16), make([]byte, 16), make([]byte, 16)
		fill(rng, src)
		std.Encrypt(want, src)
		b.Encrypt(got, src)
		if !bytes.Equal(got, want) {
			t.Fatalf("key %x, block %x: Encrypt = %x, crypto/aes %x", key, src, got, want)
		}
		b.Encrypt(src, src)
		if !bytes.Equal(src, want) {
			t.Fatalf("key %x: Encrypt in place = %x, crypto/aes %x", key, src, want)
		}
	})
}

// TestEncryptAdd compares EncryptAdd with crypto/aes on the blocks it
// stands for, hi || lo⊕x[j], added into random accumulators under random
// masks, for random keys of every size and runs of every length up to a
// few passes of sixteen and eight.
func TestEncryptAdd(t *testing.T) {
	eachRandomKey(t, 5, func(t *testing.T, rng *rand.Rand, key []byte, b *Block, std cipher.Block) {
		hi, lo := rng.Uint64(), rng.Uint64()
		mask := uint64(1)<<(20+rng.IntN(44)) - 1
		x := make([]uint64, rng.IntN(70))
		acc := make([]uint64, len(x)+1)
		for j := range x {
			x[j], acc[j] = rng.Uint64(), rng.Uint64()
		}
		acc[len(x)] = 42 // past len(x), untouched
		want := slices.Clone(acc)
		var blk [16]byte
		for j, v := range x {
			binary.BigEndian.PutUint64(blk[:8], hi)
			binary.BigEndian.PutUint64(blk[8:], lo^v)
			std.Encrypt(blk[:], blk[:])
			want[j] = (want[j] + binary.BigEndian.Uint64(blk[:8])) & mask
		}
		b.EncryptAdd(acc, mask, hi, lo, x)
		if !slices.Equal(acc, want) {
			t.Fatalf("key %x, %d values: EncryptAdd differs from crypto/aes", key, len(x))
		}
	})
}

func fill(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

func TestBadLengths(t *testing.T) {
	b, err := New(make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"short src", func() { b.Encrypt(make([]byte, 16), make([]byte, 15)) }},
		{"short dst", func() { b.Encrypt(make([]byte, 15), make([]byte, 16)) }},
		{"short accumulators", func() { b.EncryptAdd(make([]uint64, 1), 0, 0, 0, make([]uint64, 2)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tc.f()
		})
	}
	if _, err := New(make([]byte, 15)); err == nil {
		t.Fatal("New with a 15-byte key: no error")
	}
}

func (p path) String() string {
	return [...]string{"crypto-aes", "aes-ni", "vaes"}[p]
}
