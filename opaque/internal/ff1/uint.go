package ff1

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// Uint is FF1 with radix 2 over the low Bits bits of a uint64, under one
// tweak: bit Bits-1 is the most significant numeral. It computes exactly
// what Cipher.Encrypt computes on the same bits, but with integer
// arithmetic and the constant part of every round's PRF input encrypted
// once, in Cipher.Uint: a round is one AES block. It is safe for
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
	// scratch holds *blocks for EncryptN, kept from one batch to the next:
	// what goes through the cipher.Block interface is on the heap, and a
	// fresh buffer per batch was a third of a batch's allocated bytes.
	scratch sync.Pool
}

// blocks is EncryptN's scratch: the input blocks of a group, hi already in
// the first 8 bytes of each (it never changes for a Uint), then the
// output blocks.
type blocks [2 * group * 16]byte

func (f *Uint) blocks() *blocks {
	if b, ok := f.scratch.Get().(*blocks); ok {
		return b
	}
	b := new(blocks)
	for j := 0; j < group*16; j += 16 {
		binary.BigEndian.PutUint64(b[j:], f.hi)
	}
	return b
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

// tweakRound is lo with round i's number in place: it sits b bytes from
// the end of the block, and B, below 2^(8b), is XORed in beside it; b is
// at most 4, so both are inside lo.
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

// m is the width of the half round i makes: u for even rounds, v for odd
// ones.
func (f *Uint) m(i int) int {
	if i%2 == 1 {
		return f.v
	}
	return f.u
}

// y is round i's PRF output on half, as a number: the first 8 bytes of
// the encryption of hi || tweakRound(i)⊕half (d is 8 for every half of at
// most 32 bits, so no expansion is needed). blk is 32 bytes of scratch:
// the input block, then the output.
func (f *Uint) y(blk []byte, i int, half uint64) uint64 {
	binary.BigEndian.PutUint64(blk[0:], f.hi)
	binary.BigEndian.PutUint64(blk[8:], f.tweakRound(i)^half)
	f.c.block.Encrypt(blk[16:32], blk[0:16])
	return binary.BigEndian.Uint64(blk[16:])
}

// Encrypt returns the encryption of x, which must be below 2^Bits.
func (f *Uint) Encrypt(x uint64) (uint64, error) {
	if err := f.check(x); err != nil {
		return 0, err
	}
	// One scratch block for the ten rounds: what goes through the
	// cipher.Block interface escapes to the heap.
	blk := make([]byte, 32)
	a, b := x>>f.v, x&mask(f.v)
	for i := range rounds {
		// 2^m divides 2^64, so the sum may wrap before the mask.
		a, b = b, (a+f.y(blk, i, b))&mask(f.m(i))
	}
	return a<<f.v | b, nil
}

// Decrypt reverses Encrypt.
func (f *Uint) Decrypt(x uint64) (uint64, error) {
	if err := f.check(x); err != nil {
		return 0, err
	}
	blk := make([]byte, 32)
	a, b := x>>f.v, x&mask(f.v)
	for i := rounds - 1; i >= 0; i-- {
		a, b = (b-f.y(blk, i, a))&mask(f.m(i)), a
	}
	return a<<f.v | b, nil
}

// group is how many values EncryptN takes through a round together. A
// value's ten rounds are ten AES blocks, each waiting for the one before,
// so one value at a time runs at the latency of the AES instructions;
// the rounds of different values are independent, so a round over a
// group is a run of independent crypto/aes calls that the CPU overlaps,
// and the packing of blocks runs in a loop of its own beside them. 64
// values keep the halves (1 KiB) on the stack and the blocks (2 KiB) in
// L1.
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
	if len(xs) == 0 {
		return nil
	}
	buf := f.blocks()
	defer f.scratch.Put(buf)
	in, out := buf[:group*16], buf[group*16:]
	for len(xs) > 0 {
		n := min(len(xs), group)
		f.encryptGroup(xs[:n], in, out)
		xs = xs[n:]
	}
	return nil
}

// encryptGroup is Encrypt's Feistel rounds over up to group values at
// once. A round (A, B) → (B, A + y(B)) is done in place: the half that
// takes y is the other one each round, so after the ten rounds (an even
// number) a and b are A and B again.
func (f *Uint) encryptGroup(xs []uint64, in, out []byte) {
	var as, bs [group]uint64
	a, b := as[:len(xs)], bs[:len(xs)]
	v, mv, mu := f.v, mask(f.v), mask(f.u)
	for j, x := range xs {
		a[j], b[j] = x>>v, x&mv
	}
	for i := 0; i < rounds; i += 2 {
		f.roundN(a, mu, i, b, in, out)
		f.roundN(b, mv, i+1, a, in, out)
	}
	for j := range xs {
		xs[j] = a[j]<<v | b[j]
	}
}

// roundN sets acc[j] to (acc[j] + y(i, x[j])) & m for every j of x: round
// i over a group, x the halves that go in, acc those that take the
// result. in holds hi in the first 8 bytes of every block already.
//
// Packing, encrypting and adding are three loops, not one: a block
// written with an 8-byte store and read at once by AES as 16 bytes waits
// for the store to reach the cache, and measured, one loop doing all
// three per value took twice the time.
func (f *Uint) roundN(acc []uint64, m uint64, i int, x []uint64, in, out []byte) {
	lo := f.tweakRound(i)
	n := len(x) * 16
	in, out = in[:n], out[:n]
	for j, h := range x {
		binary.BigEndian.PutUint64(in[16*j+8:], lo^h)
	}
	for j := 0; j < n; j += 16 {
		f.c.block.Encrypt(out[j:j+16], in[j:j+16])
	}
	for j := range x {
		acc[j] = (acc[j] + binary.BigEndian.Uint64(out[16*j:])) & m
	}
}
