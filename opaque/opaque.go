package opaque

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/idgen/idgen/opaque/internal/ff1"
	"github.com/idgen/idgen/segment"
)

// Errors returned by ParseKey, Encode and Decode; match with errors.Is.
var (
	// ErrKey is returned for a key that is not 16, 24 or 32 bytes in hex
	// or base64.
	ErrKey = errors.New("opaque: key must be 16, 24 or 32 bytes, written in hex or base64")
	// ErrRange is returned for a counter or an ID that is not a positive
	// int64.
	ErrRange = errors.New("opaque: value must be from 1 to 9223372036854775807")
)

// bits is the width of the permuted space: the non-negative int64s.
const bits = 63

// The labels that separate each use of the key. Version 2 derives two
// subkeys from the key with HKDF-SHA256, one for FF1's AES and one for
// the fingerprint's HMAC, so that no value computed from the key under
// one use is ever one of the other. Version 1 used the key itself for
// both; its tags keep it (Under).
const (
	fingerprintLabel   = "idgen opaque key fingerprint v1"
	fingerprintLabelV2 = "idgen opaque key fingerprint v2"
	cipherInfoV2       = "idgen opaque ff1 key v2"
	fingerprintInfoV2  = "idgen opaque fingerprint key v2"
)

// The prefixes of the two kinds of fingerprint, which a store records
// with each opaque tag: they tell which derivation the tag's IDs were
// made under.
const (
	prefixV1 = "ff1:"
	prefixV2 = "ff1v2:"
)

// Key is one opaque key, with the per-tag permutations made from it so
// far. It is safe for concurrent use.
type Key struct {
	c           *ff1.Cipher
	fingerprint string
	tags        sync.Map // tag name → *ff1.Uint
	// v1 is the same key as version 1 used it, for the tags a store
	// recorded under a version-1 fingerprint; nil on v1 itself.
	v1 *Key
}

// NewKey returns a Key over raw, 16, 24 or 32 bytes (AES-128, -192,
// -256): new tags get version-2 IDs, FF1 under an AES key of the same
// length derived from raw with HKDF-SHA256.
func NewKey(raw []byte) (*Key, error) {
	if _, err := ff1.New(raw, 2); err != nil { // the length check, as version 1 made it
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	aesKey, err := hkdf.Key(sha256.New, raw, nil, cipherInfoV2, len(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	fpKey, err := hkdf.Key(sha256.New, raw, nil, fingerprintInfoV2, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	c, err := ff1.New(aesKey, 2)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	v1, err := newKeyV1(raw)
	if err != nil {
		return nil, err
	}
	return &Key{c: c, fingerprint: prefixV2 + mac(fpKey, fingerprintLabelV2), v1: v1}, nil
}

// newKeyV1 is raw as version 1 used it: FF1 under raw itself, and a
// fingerprint that is an HMAC under raw.
func newKeyV1(raw []byte) (*Key, error) {
	c, err := ff1.New(raw, 2)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	return &Key{c: c, fingerprint: prefixV1 + mac(raw, fingerprintLabel)}, nil
}

// mac is the first 8 bytes of HMAC-SHA256(key, label), in hex.
func mac(key []byte, label string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// Under returns the Key that makes the IDs of a tag recorded with
// fingerprint: k itself for k's fingerprint, or k as version 1 used it
// for k's version-1 fingerprint ("ff1:…"), which tags created before
// version 2 carry and keep for their life, since another derivation over
// the same counter could repeat their IDs. Any other fingerprint is
// another key's: ErrKeyMismatch.
func (k *Key) Under(fingerprint string) (*Key, error) {
	switch {
	case fingerprint == k.fingerprint:
		return k, nil
	case k.v1 != nil && fingerprint == k.v1.fingerprint:
		return k.v1, nil
	}
	return nil, fmt.Errorf("%w: the tag's key is %s, this key is %s", ErrKeyMismatch, fingerprint, k.fingerprint)
}

// ParseKey reads a key written in hex (32, 48 or 64 digits) or standard
// base64, surrounding white space ignored, as a key file or an environment
// variable holds it.
func ParseKey(s string) (*Key, error) {
	s = strings.TrimSpace(s)
	if raw, err := hex.DecodeString(s); err == nil {
		return NewKey(raw)
	}
	if raw, err := base64.StdEncoding.DecodeString(s); err == nil {
		return NewKey(raw)
	}
	return nil, fmt.Errorf("%w: it is %d characters of neither", ErrKey, len(s))
}

// Fingerprint names the key without revealing it: "ff1v2:" and 16 hex
// digits, the first 8 bytes of an HMAC-SHA256 under a subkey derived for
// it alone. Two instances with equal fingerprints hold the same key. A
// Key returned by Under for a version-1 tag has the version-1
// fingerprint, "ff1:" and 16 hex digits.
func (k *Key) Fingerprint() string { return k.fingerprint }

func (k *Key) perm(tag string) (*ff1.Uint, error) {
	if p, ok := k.tags.Load(tag); ok {
		return p.(*ff1.Uint), nil
	}
	p, err := k.c.Uint(bits, []byte(tag))
	if err != nil {
		return nil, err
	}
	actual, _ := k.tags.LoadOrStore(tag, p)
	return actual.(*ff1.Uint), nil
}

// Encode returns tag's opaque ID for counter, a positive int64.
func (k *Key) Encode(tag string, counter int64) (int64, error) {
	return k.walk(tag, counter, (*ff1.Uint).Encrypt)
}

// Decode returns the counter behind tag's opaque ID id.
func (k *Key) Decode(tag string, id int64) (int64, error) {
	return k.walk(tag, id, (*ff1.Uint).Decrypt)
}

// EncodeN replaces every counter in ids with tag's opaque ID for it, as
// Encode would, with one lookup of the tag's permutation for the batch. On
// an error, ids may be partly encoded: drop it.
func (k *Key) EncodeN(tag string, ids []int64) error {
	p, err := k.perm(tag)
	if err != nil {
		return err
	}
	for _, c := range ids {
		if c < 1 {
			return fmt.Errorf("%w, got %d", ErrRange, c)
		}
	}
	return encodeN(p, ids)
}

// parallelFrom is the batch size from which EncodeN spreads the work over
// the cores: a value in a batch costs about 0.1 µs (ten crypto/aes
// blocks, the rounds of 64 values overlapping), so 1024 of them are 0.1
// ms of one core, while starting a goroutine costs about 1 µs.
const parallelFrom = 1024

// piece is how many IDs a core takes at a time in a large batch: the size
// of encodeRun's buffer, about 13 µs of work.
const piece = 128

// encodeN is encodeRun on up to GOMAXPROCS cores for large batches. The
// caller works too, and the helpers take pieces from a shared counter, so
// a helper that a busy machine does not schedule soon leaves its share to
// the others instead of holding the batch up: the wait is at most the
// piece a helper holds.
func encodeN(p *ff1.Uint, ids []int64) error {
	helpers := min(runtime.GOMAXPROCS(0), len(ids)/(parallelFrom/2)) - 1
	if helpers < 1 {
		return encodeRun(p, ids)
	}
	pieces := (len(ids) + piece - 1) / piece
	var next atomic.Int64
	errs := make([]error, helpers+1)
	work := func(w int) {
		for {
			i := int(next.Add(1) - 1)
			if i >= pieces {
				return
			}
			if err := encodeRun(p, ids[i*piece:min(len(ids), (i+1)*piece)]); err != nil {
				errs[w] = err
				return
			}
		}
	}
	var wg sync.WaitGroup
	for w := range helpers {
		wg.Go(func() { work(w + 1) })
	}
	work(0)
	wg.Wait()
	return errors.Join(errs...)
}

// encodeRun encodes ids, every one positive, through a buffer on the
// stack: a batch needs no copy of its own on the heap.
func encodeRun(p *ff1.Uint, ids []int64) error {
	var buf [piece]uint64
	for len(ids) > 0 {
		xs := buf[:min(len(ids), len(buf))]
		for i := range xs {
			xs[i] = uint64(ids[i]) //nolint:gosec // G115: EncodeN checked every counter is positive
		}
		if err := p.EncryptN(xs); err != nil {
			return err
		}
		for i, y := range xs {
			for y == 0 { // cycle-walk, as walk does
				var err error
				if y, err = p.Encrypt(y); err != nil {
					return err
				}
			}
			ids[i] = int64(y) //nolint:gosec // G115: y has 63 bits (Uint of 63)
		}
		ids = ids[len(xs):]
	}
	return nil
}

// walk applies f to x and, while the result is 0, to the result again:
// cycle-walking, which makes a permutation of 0..2^63-1 one of
// 1..2^63-1, so that 0 is never an ID.
func (k *Key) walk(tag string, x int64, f func(*ff1.Uint, uint64) (uint64, error)) (int64, error) {
	if x < 1 {
		return 0, fmt.Errorf("%w, got %d", ErrRange, x)
	}
	p, err := k.perm(tag)
	if err != nil {
		return 0, err
	}
	y := uint64(x)
	for {
		if y, err = f(p, y); err != nil {
			return 0, err
		}
		if y != 0 {
			break
		}
	}
	if y > math.MaxInt64 { // cannot happen: f keeps 63 bits
		return 0, fmt.Errorf("%w, got %d", ErrRange, y)
	}
	return int64(y), nil
}

// ErrNotOpaque is returned by DecodeTag for a plain tag: its IDs are its
// counters, and decoding one would make up a counter.
var ErrNotOpaque = errors.New("opaque: the tag is not opaque; its IDs are its counters")

// Decoded is what DecodeTag tells of an ID.
type Decoded struct {
	// Counter is the counter the ID encodes under the tag's key.
	Counter int64
	// Issued is false for a counter at or above the tag's max_id: no
	// instance ever reserved it, so the ID was never handed out (a typo,
	// a guess, or another tag's ID), whatever counter it decodes to.
	Issued bool
	// Fingerprint names the key the tag's IDs are made under.
	Fingerprint string
}

// DecodeTag returns what id, an ID of t as the store holds it, encodes:
// t's counter under the Key its fingerprint names (Under), and whether
// that counter was ever reserved. A plain tag is ErrNotOpaque, another
// key's tag ErrKeyMismatch. It caches a permutation only for t, which the
// caller read from the store, so made-up tag names cost no memory.
func (k *Key) DecodeTag(t segment.Tag, id int64) (Decoded, error) {
	if t.Opaque == "" {
		return Decoded{}, fmt.Errorf("%w (tag %q)", ErrNotOpaque, t.Name)
	}
	under, err := k.Under(t.Opaque)
	if err != nil {
		return Decoded{}, fmt.Errorf("tag %q: %w", t.Name, err)
	}
	c, err := under.Decode(t.Name, id)
	if err != nil {
		return Decoded{}, err
	}
	return Decoded{Counter: c, Issued: c < t.MaxID, Fingerprint: t.Opaque}, nil
}
