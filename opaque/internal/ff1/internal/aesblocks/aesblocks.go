package aesblocks

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
)

// BlockSize is the AES block size in bytes.
const BlockSize = 16

// Pass is the most blocks a pass of the assembly takes (sixteen with
// VAES, eight with AES-NI): a batch padded to a multiple of it is
// encrypted in whole passes, with no block left to go alone.
const Pass = 16

// maxRounds is AES-256's, the most any key size takes.
const maxRounds = 14

// Block is AES under one key. It is safe for concurrent use.
type Block struct {
	// std is crypto/aes under the same key: every block goes through it
	// when asm is false.
	std    cipher.Block
	asm    bool // AES-NI, eight blocks in flight
	vaes   bool // and VAES on 256-bit registers for EncryptAdd, sixteen
	rounds int
	// enc is the expanded key, rounds+1 round keys of 16 bytes in the
	// byte order of FIPS-197 (w[i] most significant byte first), which
	// is the order AESENC takes them from memory.
	enc [(maxRounds + 1) * BlockSize]byte
}

// New returns AES under key, 16, 24 or 32 bytes (AES-128, -192, -256).
func New(key []byte) (*Block, error) {
	return newBlock(key, pathOf(useAsm(), useVAES()))
}

// path is how a Block encrypts.
type path int

const (
	pathStd  path = iota // crypto/aes, a block at a time
	pathAsm              // AES-NI
	pathVAES             // AES-NI, and VAES for EncryptAdd
)

func pathOf(asm, vaes bool) path {
	switch {
	case vaes:
		return pathVAES
	case asm:
		return pathAsm
	}
	return pathStd
}

// newBlock is New with the path chosen by the caller, so that the tests
// run every path the machine has.
func newBlock(key []byte, p path) (*Block, error) {
	std, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aesblocks: %w", err)
	}
	b := &Block{std: std, asm: p >= pathAsm, vaes: p == pathVAES, rounds: len(key)/4 + 6}
	expandKey(b.enc[:(b.rounds+1)*BlockSize], key)
	return b, nil
}

// Accelerated reports whether b encrypts several blocks per pass (AES-NI)
// rather than one at a time through crypto/aes.
func (b *Block) Accelerated() bool { return b.asm }

// Encrypt encrypts the block src into dst, which may be the same slice.
// Both must hold at least 16 bytes. It is one block at a time, as
// crypto/aes is, for the parts of FF1 that chain blocks (the CBC-MAC of
// a long tweak); what batches is EncryptAdd.
func (b *Block) Encrypt(dst, src []byte) {
	if len(src) < BlockSize || len(dst) < BlockSize {
		panic("aesblocks: input not full block")
	}
	if b.asm {
		encryptBlockAsm(b.rounds, &b.enc[0], &dst[0], &src[0])
		return
	}
	// Through the cipher.Block interface a slice escapes; going through
	// a scratch block keeps the callers' buffers (FF1's are on the stack)
	// from escaping on the fast path too.
	tmp := new([BlockSize]byte)
	copy(tmp[:], src[:BlockSize])
	b.std.Encrypt(tmp[:], tmp[:])
	copy(dst[:BlockSize], tmp[:])
}

// EncryptAdd sets acc[j], for every j of x, to (acc[j] + y) & mask,
// where y is the first 8 bytes of the encryption of the block hi ||
// lo⊕x[j], all read and written as big-endian uint64s. That is a round of
// FF1 in radix 2 on at most 64 bits: hi and lo are the constant part of
// the round's PRF input, x[j] the half that goes in, acc[j] the half that
// takes the result, mask the width of that half. Taking integers and
// adding into them spares the caller packing blocks into bytes and back,
// which would cost more than the encryption itself. acc must be at least
// as long as x, and either the same slice or not overlapping it.
func (b *Block) EncryptAdd(acc []uint64, mask, hi, lo uint64, x []uint64) {
	if len(acc) < len(x) {
		panic("aesblocks: accumulators fewer than inputs")
	}
	if b.vaes && len(x) >= 16 {
		n := len(x) &^ 15
		encryptAddVAES(b.rounds, &b.enc[0], &acc[0], mask, hi, lo, &x[0], n)
		acc, x = acc[n:], x[n:]
	}
	if len(x) == 0 {
		return
	}
	if b.asm {
		encryptAddAsm(b.rounds, &b.enc[0], &acc[0], mask, hi, lo, &x[0], len(x))
		return
	}
	tmp := new([BlockSize]byte) // see Encrypt
	for j, v := range x {
		binary.BigEndian.PutUint64(tmp[:8], hi)
		binary.BigEndian.PutUint64(tmp[8:], lo^v)
		b.std.Encrypt(tmp[:], tmp[:])
		acc[j] = (acc[j] + binary.BigEndian.Uint64(tmp[:8])) & mask
	}
}
