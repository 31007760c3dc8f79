package ff1

import (
	"encoding/binary"
	"fmt"
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

// round returns y of one round: the first 8 bytes of the PRF output (d is
// 8 for every half of at most 32 bits, so no expansion is needed). The
// round number sits b bytes from the end of the block and B in the last b
// bytes, both inside lo since b is at most 4. blk is scratch space: it
// passes through the cipher.Block interface, so it escapes, and one
// allocation per value, or per batch, is cheaper than one per round.
func (f *Uint) round(blk *[16]byte, i int, half uint64) uint64 {
	binary.BigEndian.PutUint64(blk[:8], f.hi)
	binary.BigEndian.PutUint64(blk[8:], f.lo^(uint64(i)<<(8*f.b)|half)) //nolint:gosec // G115: i is a round, 0 to 9
	f.c.block.Encrypt(blk[:], blk[:])
	return binary.BigEndian.Uint64(blk[:8])
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
	return f.encrypt(new([16]byte), x), nil
}

// EncryptN encrypts every value of xs in place, as Encrypt would, with
// one scratch block for the whole batch. On an error, xs is unchanged.
func (f *Uint) EncryptN(xs []uint64) error {
	for _, x := range xs {
		if err := f.check(x); err != nil {
			return err
		}
	}
	blk := new([16]byte)
	for i, x := range xs {
		xs[i] = f.encrypt(blk, x)
	}
	return nil
}

func (f *Uint) encrypt(blk *[16]byte, x uint64) uint64 {
	a, b := x>>f.v, x&mask(f.v)
	for i := range rounds {
		m := f.u
		if i%2 == 1 {
			m = f.v
		}
		// (A + y) mod 2^m: 2^m divides 2^64, so wrapping is harmless.
		c := (a + f.round(blk, i, b)) & mask(m)
		a, b = b, c
	}
	return a<<f.v | b
}

// Decrypt reverses Encrypt.
func (f *Uint) Decrypt(x uint64) (uint64, error) {
	if err := f.check(x); err != nil {
		return 0, err
	}
	blk := new([16]byte)
	a, b := x>>f.v, x&mask(f.v)
	for i := rounds - 1; i >= 0; i-- {
		m := f.u
		if i%2 == 1 {
			m = f.v
		}
		c := (b - f.round(blk, i, a)) & mask(m)
		b, a = a, c
	}
	return a<<f.v | b, nil
}
