package ff1

import (
	"encoding/binary"
	"fmt"

	"github.com/idgen/idgen/opaque/internal/ff1/internal/aesblocks"
)

// Uint is FF1 with radix 2 over the low Bits bits of a uint64, under one
// tweak: bit Bits-1 is the most significant numeral. It computes exactly
// what Cipher.Encrypt computes on the same bits, but with integer
// arithmetic and the constant part of every round's PRF input encrypted
// once, in Cipher.Uint: a round is one AES call. It is safe for
// concurrent use.
type Uint struct {
	c    *Cipher
	bits int
	u, v int
	b    int
	// hi and lo are the last block of P || Q with the round number and B
	// left zero, XORed with the CBC-MAC chaining value after every block
	// before it: a round only XORs its number and B into lo and encrypts.
	hi, lo uint64
}

// Uint returns the fast radix-2 form of c for values of bits bits (from
// the minimum domain's 20 up to 64) under tweak. c's radix must be 2.
func (c *Cipher) Uint(bits int, tweak []byte) (*Uint, error) {
	if c.radix != 2 {
		return nil, fmt.Errorf("%w: Uint needs radix 2, the cipher has %d", ErrRadix, c.radix)
	}
	if bits < c.minLen || bits > 64 {
		return nil, fmt.Errorf("%w: %d bits, want %d to 64", ErrLength, bits, c.minLen)
	}
	if err := c.check(bits, tweak); err != nil {
		return nil, err
	}
	p := c.params(bits)
	msg := c.message(p, tweak)
	state := c.prf(msg[:len(msg)-16])
	subtle16(&state, msg[len(msg)-16:])
	return &Uint{c: c, bits: bits, u: p.u, v: p.v, b: p.b,
		hi: binary.BigEndian.Uint64(state[:8]), lo: binary.BigEndian.Uint64(state[8:])}, nil
}

// Bits returns the width of the values f takes and returns.
func (f *Uint) Bits() int { return f.bits }

// round returns (acc + y) mod 2^m, y being round i's output on half: the
// first 8 bytes of the PRF output (d is 8 for every half of at most 32
// bits, so no expansion is needed). The round number sits b bytes from the
// end of the block and B in the last b bytes, both inside lo since b is at
// most 4. 2^m divides 2^64, so the sum may wrap before the mask.
func (f *Uint) round(i int, acc, half uint64) uint64 {
	a, x := [1]uint64{acc}, [1]uint64{half}
	f.c.block.EncryptAdd(a[:], mask(f.m(i)), f.hi, f.tweakRound(i), x[:])
	return a[0]
}

// tweakRound is lo with round i's number in place; B, below 2^(8b), is
// XORed in beside it.
func (f *Uint) tweakRound(i int) uint64 {
	return f.lo ^ uint64(i)<<(8*f.b) //nolint:gosec // G115: i is a round, 0 to 9
}

func (f *Uint) check(x uint64) error {
	if f.bits < 64 && x>>f.bits != 0 {
		return fmt.Errorf("%w: %d does not fit in %d bits", ErrNumeral, x, f.bits)
	}
	return nil
}

func mask(m int) uint64 { return 1<<m - 1 }

// Encrypt returns the encryption of x, which must be below 2^Bits.
func (f *Uint) Encrypt(x uint64) (uint64, error) {
	if err := f.check(x); err != nil {
		return 0, err
	}
	a, b := x>>f.v, x&mask(f.v)
	for i := range rounds {
		a, b = b, f.round(i, a, b)
	}
	return a<<f.v | b, nil
}

// m is the width of the half round i makes: u for even rounds, v for odd
// ones.
func (f *Uint) m(i int) int {
	if i%2 == 1 {
		return f.v
	}
	return f.u
}

// group is how many values EncryptN takes through a round together: every
// round of every value is one AES block, independent of the other
// values', so a round of a group is one EncryptAdd call, sixteen blocks
// in flight with VAES (eight with AES-NI) instead of one. 64 values keep
// the group's halves (1 KiB) on the stack and the call small beside the
// work.
const group = 64

// EncryptN encrypts every value of xs in place, as Encrypt would, a group
// of values per round. On an error, xs is unchanged.
func (f *Uint) EncryptN(xs []uint64) error {
	// One OR over the batch says whether any value is too wide; only
	// then is the culprit looked for.
	var all uint64
	for _, x := range xs {
		all |= x
	}
	if f.check(all) != nil {
		for _, x := range xs {
			if err := f.check(x); err != nil {
				return err
			}
		}
	}
	for len(xs) > 0 {
		n := min(len(xs), group)
		f.encryptGroup(xs[:n])
		xs = xs[n:]
	}
	return nil
}

// encryptGroup is Encrypt's Feistel rounds over up to group values at
// once. A round (A, B) → (B, A + y(B)) is done in place: the half that
// takes y is the other one each round, so after the ten rounds (an even
// number) a and b are A and B again.
func (f *Uint) encryptGroup(xs []uint64) {
	var as, bs [group]uint64
	// A group rounded up to whole passes of the assembly: the values past
	// xs are zeros, encrypted and thrown away, nearly free beside a block
	// that goes alone.
	n := min(group, (len(xs)+aesblocks.Pass-1)/aesblocks.Pass*aesblocks.Pass)
	a, b := as[:n], bs[:n]
	v, mv, mu := f.v, mask(f.v), mask(f.u)
	for j, x := range xs {
		a[j], b[j] = x>>v, x&mv
	}
	for i := 0; i < rounds; i += 2 {
		f.c.block.EncryptAdd(a, mu, f.hi, f.tweakRound(i), b)
		f.c.block.EncryptAdd(b, mv, f.hi, f.tweakRound(i+1), a)
	}
	for j := range xs {
		xs[j] = a[j]<<v | b[j]
	}
}

// Decrypt reverses Encrypt.
func (f *Uint) Decrypt(x uint64) (uint64, error) {
	if err := f.check(x); err != nil {
		return 0, err
	}
	a, b := x>>f.v, x&mask(f.v)
	for i := rounds - 1; i >= 0; i-- {
		c := (b - f.round(i, 0, a)) & mask(f.m(i))
		b, a = a, c
	}
	return a<<f.v | b, nil
}
