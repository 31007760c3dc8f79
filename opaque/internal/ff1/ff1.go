package ff1

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
)

// Errors returned by New, Encrypt, Decrypt and Uint. Each is wrapped with
// the offending value; match with errors.Is.
var (
	// ErrKey is returned for a key that is not 16, 24 or 32 bytes
	// (AES-128, AES-192 or AES-256).
	ErrKey = errors.New("ff1: key must be 16, 24 or 32 bytes")
	// ErrRadix is returned for a radix outside 2 to 65536.
	ErrRadix = errors.New("ff1: radix must be from 2 to 65536")
	// ErrLength is returned for a numeral string whose domain is below a
	// million values (NIST's minimum) or longer than MaxLen, and for a
	// bit width Uint cannot take.
	ErrLength = errors.New("ff1: invalid length")
	// ErrNumeral is returned for a numeral not below the radix, or a
	// value that does not fit the Uint's bits.
	ErrNumeral = errors.New("ff1: numeral out of range")
	// ErrTweak is returned for a tweak longer than MaxTweak bytes.
	ErrTweak = errors.New("ff1: tweak too long")
)

const (
	// MinDomain is the smallest number of values a numeral string may
	// take (radix^length), from SP 800-38G Rev. 1.
	MinDomain = 1_000_000
	// MaxLen bounds the numeral strings Encrypt takes. The standard allows
	// 2^32; idgen's strings are 63 numerals, so a bound that keeps the
	// big-number arithmetic small is enough.
	MaxLen = 1 << 16
	// MaxTweak bounds the tweak, which the standard leaves to the
	// implementation.
	MaxTweak = 1 << 16
	rounds   = 10
)

// Cipher is FF1 under one AES key and radix. It is safe for concurrent
// use.
type Cipher struct {
	block  cipher.Block // crypto/aes
	radix  int
	minLen int
}

// New returns FF1 with the given AES key and radix.
func New(key []byte, radix int) (*Cipher, error) {
	return newCipher(key, radix, MinDomain)
}

// newCipher is New with another minimum domain, so that tests can check
// the permutation exhaustively on domains too small for real use.
func newCipher(key []byte, radix int, minDomain int64) (*Cipher, error) {
	switch len(key) {
	case 16, 24, 32:
	default:
		return nil, fmt.Errorf("%w, got %d", ErrKey, len(key))
	}
	if radix < 2 || radix > 1<<16 {
		return nil, fmt.Errorf("%w, got %d", ErrRadix, radix)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	minLen := 2
	for d := int64(radix) * int64(radix); d < minDomain; d *= int64(radix) {
		minLen++
	}
	return &Cipher{block: block, radix: radix, minLen: minLen}, nil
}

// Radix returns the radix the Cipher was made with.
func (c *Cipher) Radix() int { return c.radix }

// Encrypt returns the FF1 encryption of the numeral string x under tweak:
// a string of len(x) numerals, each below the radix. It does not modify x.
func (c *Cipher) Encrypt(x []uint16, tweak []byte) ([]uint16, error) {
	return c.crypt(x, tweak, false)
}

// Decrypt reverses Encrypt under the same tweak.
func (c *Cipher) Decrypt(x []uint16, tweak []byte) ([]uint16, error) {
	return c.crypt(x, tweak, true)
}

func (c *Cipher) check(n int, tweak []byte) error {
	if n < c.minLen || n > MaxLen {
		return fmt.Errorf("%w: %d numerals in radix %d, want %d to %d", ErrLength, n, c.radix, c.minLen, MaxLen)
	}
	if len(tweak) > MaxTweak {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTweak, len(tweak), MaxTweak)
	}
	return nil
}

// params are the lengths of Algorithms 7 and 8, steps 1 to 4.
type params struct {
	n, u, v int
	b, d    int
}

func (c *Cipher) params(n int) params {
	u := n / 2
	v := n - u
	// b = ceil(ceil(v·log2(radix))/8). ceil(v·log2(radix)) is the bit
	// length of radix^v - 1, exactly, without floating point.
	rv := new(big.Int).Exp(big.NewInt(int64(c.radix)), big.NewInt(int64(v)), nil)
	bits := rv.Sub(rv, big.NewInt(1)).BitLen()
	b := (bits + 7) / 8
	d := 4*((b+3)/4) + 4
	return params{n: n, u: u, v: v, b: b, d: d}
}

// header is P, the first block of every round's PRF input (step 5).
func (c *Cipher) header(p params, t int) [16]byte {
	var h [16]byte
	h[0], h[1], h[2] = 1, 2, 1
	// [radix]^3 and [u mod 256]^1 truncate as the standard says; radix is
	// at most 2^16, n at most MaxLen and t at most MaxTweak, so nothing
	// else is lost.
	h[3], h[4], h[5] = byte(c.radix>>16), byte(c.radix>>8), byte(c.radix) //nolint:gosec // G115: see above
	h[6] = rounds
	h[7] = byte(p.u)                               //nolint:gosec // G115: u mod 256
	binary.BigEndian.PutUint32(h[8:], uint32(p.n)) //nolint:gosec // G115: n <= MaxLen
	binary.BigEndian.PutUint32(h[12:], uint32(t))  //nolint:gosec // G115: t <= MaxTweak
	return h
}

// message is P || Q of every round, with Q = T || 0^((-t-b-1) mod 16) ||
// [i]^1 || [NUM(B)]^b, the last 1+b bytes, round number and B, left zero:
// a multiple of 16 bytes.
func (c *Cipher) message(p params, tweak []byte) []byte {
	t := len(tweak)
	pad := ((-t-p.b-1)%16 + 16) % 16
	h := c.header(p, t)
	msg := make([]byte, 0, 16+t+pad+1+p.b)
	msg = append(msg, h[:]...)
	msg = append(msg, tweak...)
	return append(msg, make([]byte, pad+1+p.b)...)
}

// prf is PRF of step 6.ii: CBC-MAC with AES under a zero IV, of data whose
// length is a multiple of 16.
func (c *Cipher) prf(data []byte) [16]byte {
	var y [16]byte
	for i := 0; i < len(data); i += 16 {
		subtle16(&y, data[i:i+16])
		c.block.Encrypt(y[:], y[:])
	}
	return y
}

func subtle16(y *[16]byte, x []byte) {
	for i := range y {
		y[i] ^= x[i]
	}
}

// expand is step 6.iii: the first d bytes of R || CIPH(R ⊕ [1]^16) ||
// CIPH(R ⊕ [2]^16) ….
func (c *Cipher) expand(r [16]byte, d int) []byte {
	s := make([]byte, 0, (d+15)/16*16)
	s = append(s, r[:]...)
	for j := uint64(1); len(s) < d; j++ {
		var blk [16]byte
		binary.BigEndian.PutUint64(blk[8:], j)
		for i := range blk {
			blk[i] ^= r[i]
		}
		c.block.Encrypt(blk[:], blk[:])
		s = append(s, blk[:]...)
	}
	return s[:d]
}

func (c *Cipher) crypt(x []uint16, tweak []byte, decrypt bool) ([]uint16, error) {
	n := len(x)
	if err := c.check(n, tweak); err != nil {
		return nil, err
	}
	for i, num := range x {
		if int(num) >= c.radix {
			return nil, fmt.Errorf("%w: numeral %d at %d is not below radix %d", ErrNumeral, num, i, c.radix)
		}
	}
	p := c.params(n)
	radix := big.NewInt(int64(c.radix))
	modU := new(big.Int).Exp(radix, big.NewInt(int64(p.u)), nil)
	modV := new(big.Int).Exp(radix, big.NewInt(int64(p.v)), nil)
	a, b := num(x[:p.u], c.radix), num(x[p.u:], c.radix)

	buf := c.message(p, tweak)
	iAt := len(buf) - 1 - p.b

	y := new(big.Int)
	for k := range rounds {
		i := k
		if decrypt {
			i = rounds - 1 - k
		}
		in := b // the half fed to the PRF
		if decrypt {
			in = a
		}
		buf[iAt] = byte(i)
		in.FillBytes(buf[iAt+1:])
		s := c.expand(c.prf(buf), p.d)
		y.SetBytes(s)
		mod := modU
		if i%2 == 1 {
			mod = modV
		}
		if decrypt {
			cc := new(big.Int).Sub(b, y)
			cc.Mod(cc, mod)
			b, a = a, cc
		} else {
			cc := new(big.Int).Add(a, y)
			cc.Mod(cc, mod)
			a, b = b, cc
		}
	}
	out := make([]uint16, n)
	str(out[:p.u], a, c.radix)
	str(out[p.u:], b, c.radix)
	return out, nil
}

// num is NUM_radix: the numerals as a number, most significant first.
func num(x []uint16, radix int) *big.Int {
	r := big.NewInt(int64(radix))
	v := new(big.Int)
	for _, d := range x {
		v.Mul(v, r)
		v.Add(v, big.NewInt(int64(d)))
	}
	return v
}

// str is STR^m_radix: v as len(out) numerals, most significant first.
func str(out []uint16, v *big.Int, radix int) {
	r := big.NewInt(int64(radix))
	v = new(big.Int).Set(v)
	d := new(big.Int)
	for i := len(out) - 1; i >= 0; i-- {
		v.DivMod(v, r, d)
		out[i] = uint16(d.Int64()) //nolint:gosec // G115: d < radix <= 2^16
	}
}
