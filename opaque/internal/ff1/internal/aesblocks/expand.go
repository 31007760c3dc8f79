package aesblocks

import "encoding/binary"

// expandKey writes the key schedule of FIPS-197 §5.2 (KeyExpansion) for
// key into enc, which holds 4·(Nr+1) words: Nk = len(key)/4 words of the
// key, then w[i] = w[i-Nk] ⊕ temp, where temp is w[i-1], put through
// RotWord, SubWord and Rcon every Nk words, and through SubWord alone
// halfway for AES-256.
func expandKey(enc, key []byte) {
	nk := len(key) / 4
	copy(enc, key)
	rcon := byte(1)
	for i := nk; i < len(enc)/4; i++ {
		temp := binary.BigEndian.Uint32(enc[4*(i-1):])
		switch {
		case i%nk == 0:
			temp = subWord(temp<<8|temp>>24) ^ uint32(rcon)<<24
			rcon = mul(rcon, 2)
		case nk > 6 && i%nk == 4:
			temp = subWord(temp)
		}
		binary.BigEndian.PutUint32(enc[4*i:], binary.BigEndian.Uint32(enc[4*(i-nk):])^temp)
	}
}

func subWord(w uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], w)
	for i := range b {
		b[i] = sbox(b[i])
	}
	return binary.BigEndian.Uint32(b[:])
}

// sbox is S-box of FIPS-197 §5.1.1: the multiplicative inverse in GF(2^8)
// (0 for 0), then the affine map b ⊕ (b<<<1) ⊕ (b<<<2) ⊕ (b<<<3) ⊕
// (b<<<4) ⊕ 0x63. Computing it costs a few hundred operations a key,
// once, and leaves no table to get wrong.
func sbox(b byte) byte {
	x := inverse(b)
	return x ^ rotl(x, 1) ^ rotl(x, 2) ^ rotl(x, 3) ^ rotl(x, 4) ^ 0x63
}

func rotl(b byte, n int) byte { return b<<n | b>>(8-n) }

// inverse is b^254, b's inverse in GF(2^8) and 0 for 0.
func inverse(b byte) byte {
	r := byte(1)
	for e := 254; e > 0; e >>= 1 {
		if e&1 == 1 {
			r = mul(r, b)
		}
		b = mul(b, b)
	}
	return r
}

// mul multiplies in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1 (FIPS-197
// §4.2).
func mul(a, b byte) byte {
	var p byte
	for b != 0 {
		if b&1 == 1 {
			p ^= a
		}
		carry := a & 0x80
		a <<= 1
		if carry != 0 {
			a ^= 0x1b
		}
		b >>= 1
	}
	return p
}
