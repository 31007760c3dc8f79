package opaque

import (
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

// fingerprintLabel separates the fingerprint's HMAC from any other use of
// the key.
const fingerprintLabel = "idgen opaque key fingerprint v1"

// Key is one opaque key, with the per-tag permutations made from it so
// far. It is safe for concurrent use.
type Key struct {
	c           *ff1.Cipher
	fingerprint string
	tags        sync.Map // tag name → *ff1.Uint
}

// NewKey returns a Key over raw, 16, 24 or 32 bytes (AES-128, -192, -256).
func NewKey(raw []byte) (*Key, error) {
	c, err := ff1.New(raw, 2)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	m := hmac.New(sha256.New, raw)
	m.Write([]byte(fingerprintLabel))
	sum := m.Sum(nil)
	return &Key{c: c, fingerprint: "ff1:" + hex.EncodeToString(sum[:8])}, nil
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

// Fingerprint names the key without revealing it: the first 8 bytes of an
// HMAC-SHA256 under the key, as "ff1:" and 16 hex digits. Two instances
// with equal fingerprints hold the same key.
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
