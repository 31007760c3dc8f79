package opaque

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/segment"
)

// Errors of Generator; match with errors.Is.
var (
	// ErrNoKey is returned for an opaque tag by a Generator that holds no
	// key: it cannot encode the tag's IDs, and must not hand out the
	// counters.
	ErrNoKey = errors.New("opaque: the tag is opaque and this instance has no opaque key")
	// ErrKeyMismatch is returned for an opaque tag created under another
	// key than the Generator's. Two keys over one counter could hand out
	// the same ID, so the tag is refused rather than guessed at.
	ErrKeyMismatch = errors.New("opaque: the tag was created under another opaque key")
	// ErrRangeRefused is returned by ReserveRange for an opaque tag: a
	// range is a run of raw counters, which would give away what the tag
	// hides. Take batches of IDs instead.
	ErrRangeRefused = errors.New("opaque: ranges of an opaque tag cannot be handed out; ask for a batch of IDs instead")
)

// Tags tells which tags are opaque. The stores implement it; their
// TagOpaque returns the fingerprint a tag was created under, "" for a
// plain tag, or an error wrapping segment.ErrTagNotFound.
type Tags interface {
	TagOpaque(ctx context.Context, tag string) (string, error)
}

// RangeReserver is the part of *segment.Allocator that hands out whole
// ranges.
type RangeReserver interface {
	ReserveRange(ctx context.Context, tag string, n int64) (segment.Range, error)
}

// Generator hands out the IDs of g, encoded with key for the tags that
// were created opaque, as they are for the others. It is what a server
// puts in front of its segment allocator so that every route serves a
// tag the same way. Opaque tags' IDs are unique but in no order, so for
// them NextN's IDs do not increase.
//
// What a tag is never changes, so the Generator asks tags once per tag,
// after the tag's first ID: tags that do not exist cost no query, and
// the answers held are bounded by the tags the allocator serves.
//
// Next on an opaque tag hands out IDs encoded ahead, Ahead at a time: one
// FF1 encryption is ten AES calls, each waiting for the one before, while
// a batch encrypts many values' rounds together for a tenth of the cost
// per ID. The IDs encoded ahead and not handed out when the process stops
// are a gap, which an opaque tag's IDs, in no order, never show.
type Generator struct {
	g    idgen.Generator
	tags Tags
	key  *Key // nil: opaque tags are refused

	kinds sync.Map // tag → kind
	ahead sync.Map // opaque tag → *ahead
}

// Ahead is how many IDs of an opaque tag Next encodes at a time: enough
// that the batch's cost per ID (about 25 ns) is most of it, few enough
// that a refill adds about 2 µs to the call that makes it.
const Ahead = 64

// ahead is an opaque tag's IDs encoded ahead. Taking one is an atomic
// add; refilling takes mu, so that one caller refills and the others
// wait for it rather than each taking a batch.
type ahead struct {
	mu  sync.Mutex
	cur atomic.Pointer[encoded]
}

type encoded struct {
	ids  []int64
	next atomic.Int64
}

// kind is what a tag is to this Generator.
type kind struct {
	opaque bool
	err    error // ErrNoKey or ErrKeyMismatch, wrapped: the tag is refused
}

// NewGenerator returns a Generator over g, asking tags which tags are
// opaque. key may be nil: opaque tags are then refused with ErrNoKey.
func NewGenerator(g idgen.Generator, tags Tags, key *Key) *Generator {
	return &Generator{g: g, tags: tags, key: key}
}

// Key returns the Generator's key, or nil.
func (g *Generator) Key() *Key { return g.key }

// Next implements idgen.Generator.
func (g *Generator) Next(ctx context.Context, tag string) (int64, error) {
	k, known := g.cached(tag)
	if known && k.err != nil {
		return 0, k.err
	}
	if known && k.opaque {
		return g.nextAhead(ctx, tag)
	}
	id, err := g.g.Next(ctx, tag)
	if err != nil {
		return 0, err
	}
	if !known {
		if k, err = g.learn(ctx, tag); err != nil {
			return 0, err
		}
		if k.err != nil {
			return 0, k.err // the ID is dropped: a gap, never a raw counter
		}
	}
	if !k.opaque {
		return id, nil
	}
	return g.key.Encode(tag, id)
}

// nextAhead hands out the next of tag's IDs encoded ahead, encoding
// Ahead more when they run out.
func (g *Generator) nextAhead(ctx context.Context, tag string) (int64, error) {
	v, ok := g.ahead.Load(tag)
	if !ok {
		v, _ = g.ahead.LoadOrStore(tag, new(ahead))
	}
	a := v.(*ahead)
	for {
		if e := a.cur.Load(); e != nil {
			if i := e.next.Add(1) - 1; i < int64(len(e.ids)) {
				return e.ids[i], nil
			}
		}
		if err := g.refill(ctx, tag, a); err != nil {
			return 0, err
		}
	}
}

// refill encodes Ahead more of tag's IDs into a, unless another caller
// did while this one waited for the lock.
func (g *Generator) refill(ctx context.Context, tag string, a *ahead) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.cur.Load(); e != nil && e.next.Load() < int64(len(e.ids)) {
		return nil
	}
	ids, err := g.g.NextN(ctx, tag, Ahead)
	if err != nil {
		return err
	}
	if err := g.key.EncodeN(tag, ids); err != nil {
		return err
	}
	e := &encoded{ids: ids}
	a.cur.Store(e)
	return nil
}

// NextN implements idgen.Generator.
func (g *Generator) NextN(ctx context.Context, tag string, n int) ([]int64, error) {
	k, known := g.cached(tag)
	if known && k.err != nil {
		return nil, k.err
	}
	ids, err := g.g.NextN(ctx, tag, n)
	if err != nil {
		return nil, err
	}
	if !known {
		if k, err = g.learn(ctx, tag); err != nil {
			return nil, err
		}
		if k.err != nil {
			return nil, k.err
		}
	}
	if !k.opaque {
		return ids, nil
	}
	if err := g.key.EncodeN(tag, ids); err != nil {
		return nil, err
	}
	return ids, nil
}

// ReserveRange passes plain tags' ranges through from the wrapped
// generator, which must have a ReserveRange (as *segment.Allocator has),
// and refuses opaque tags with ErrRangeRefused before anything is
// reserved. A tag that does not exist yet may be auto-created by the
// reservation: if it turns out opaque, the range is dropped, a gap, and
// refused.
func (g *Generator) ReserveRange(ctx context.Context, tag string, n int64) (segment.Range, error) {
	rr, ok := g.g.(RangeReserver)
	if !ok {
		return segment.Range{}, errors.New("opaque: the wrapped generator hands out no ranges")
	}
	k, known := g.cached(tag)
	if !known {
		var err error
		k, err = g.learn(ctx, tag)
		if errors.Is(err, segment.ErrTagNotFound) {
			r, err := rr.ReserveRange(ctx, tag, n)
			if err != nil {
				return r, err
			}
			if k, err = g.learn(ctx, tag); err != nil {
				return segment.Range{}, err
			}
			if err := k.allowRange(tag); err != nil {
				return segment.Range{}, err
			}
			return r, nil
		}
		if err != nil {
			return segment.Range{}, err
		}
	}
	if err := k.allowRange(tag); err != nil {
		return segment.Range{}, err
	}
	return rr.ReserveRange(ctx, tag, n)
}

func (k kind) allowRange(tag string) error {
	if k.err != nil {
		return k.err
	}
	if k.opaque {
		return fmt.Errorf("%w (tag %q)", ErrRangeRefused, tag)
	}
	return nil
}

// Opaque reports whether tag is opaque, asking the store the first time.
func (g *Generator) Opaque(ctx context.Context, tag string) (bool, error) {
	k, known := g.cached(tag)
	if !known {
		var err error
		if k, err = g.learn(ctx, tag); err != nil {
			return false, err
		}
	}
	return k.opaque, k.err
}

func (g *Generator) cached(tag string) (kind, bool) {
	v, ok := g.kinds.Load(tag)
	if !ok {
		return kind{}, false
	}
	return v.(kind), true
}

// learn asks the store what tag is and remembers the answer, which never
// changes; errors of the store itself are not remembered.
func (g *Generator) learn(ctx context.Context, tag string) (kind, error) {
	fp, err := g.tags.TagOpaque(ctx, tag)
	if errors.Is(err, segment.ErrTagNotFound) {
		return kind{}, err
	}
	if err != nil {
		// The ID already taken is dropped, never handed out raw; the
		// caller may retry like any store outage.
		return kind{}, fmt.Errorf("%w: is tag %q opaque? %w", segment.ErrUnavailable, tag, err)
	}
	k := kind{opaque: fp != ""}
	switch {
	case !k.opaque:
	case g.key == nil:
		k.err = fmt.Errorf("%w: tag %q was created under key %s; start this instance with that key (--opaque-key-file or IDGEN_OPAQUE_KEY)", ErrNoKey, tag, fp)
	case g.key.Fingerprint() != fp:
		k.err = fmt.Errorf("%w: tag %q was created under key %s, this instance holds %s; start every instance with the same key", ErrKeyMismatch, tag, fp, g.key.Fingerprint())
	}
	g.kinds.Store(tag, k)
	return k, nil
}
