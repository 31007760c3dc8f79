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
	// ErrRefused is returned for an opaque tag that this Generator's
	// store cannot serve safely; a Tags whose TagOpaque returns it,
	// wrapped, has the tag refused for good, never served raw.
	ErrRefused      = errors.New("opaque: the tag is opaque and this instance serves no opaque tags")
	ErrRangeRefused = errors.New("opaque: ranges of an opaque tag cannot be handed out; ask for a batch of IDs instead")
)

// Tags tells which tags are opaque. The stores implement it; their
// TagOpaque returns the fingerprint a tag was created under, "" for a
// plain tag, or an error wrapping segment.ErrTagNotFound. An error
// wrapping ErrRefused or segment.ErrOpaqueConflict has the tag refused
// for good.
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
// a batch encrypts many values' rounds together for a third of the cost
// per ID. The caller that takes the middle ID of a batch encodes the next
// one, so the others go on taking without waiting for it. The IDs encoded
// ahead and not handed out when the process stops, fewer than 2 × Ahead,
// are a gap, which an opaque tag's IDs, in no order, never show.
type Generator struct {
	g    idgen.Generator
	tags Tags
	key  *Key // nil: opaque tags are refused

	kinds sync.Map // tag → kind
	ahead sync.Map // opaque tag → *ahead
}

// Ahead is how many IDs of an opaque tag Next encodes at a time: enough
// that the batch's cost per ID (about 0.1 µs, against 0.3 µs one at a
// time) is most of it, few enough that a refill adds about 7 µs to the
// call that makes it.
const Ahead = 64

// ahead is an opaque tag's IDs encoded ahead. Taking one is an atomic
// add. The batch after cur is encoded while cur is half taken, into
// next; encoding it, moving on to it, or encoding one when it is not
// there takes mu, so that one batch is encoded at a time and the callers
// that find cur run out wait for it rather than each taking a batch.
type ahead struct {
	mu   sync.Mutex
	cur  atomic.Pointer[encoded]
	next atomic.Pointer[encoded]
}

type encoded struct {
	ids  []int64
	next atomic.Int64
}

// kind is what a tag is to this Generator.
type kind struct {
	opaque bool
	key    *Key  // the Key the tag's IDs are made under (Key.Under)
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
		return g.nextAhead(ctx, tag, k.key)
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
	return k.key.Encode(tag, id)
}

// nextAhead hands out the next of tag's IDs encoded ahead.
func (g *Generator) nextAhead(ctx context.Context, tag string, key *Key) (int64, error) {
	v, ok := g.ahead.Load(tag)
	if !ok {
		v, _ = g.ahead.LoadOrStore(tag, new(ahead))
	}
	a := v.(*ahead)
	for {
		e := a.cur.Load()
		if e != nil {
			i := e.next.Add(1) - 1
			if i < int64(len(e.ids)) {
				if i == int64(len(e.ids)/2) {
					g.prepare(ctx, tag, key, a)
				}
				return e.ids[i], nil
			}
		}
		if err := g.moveOn(ctx, tag, key, a, e); err != nil {
			return 0, err
		}
	}
}

// prepare encodes the batch after a's current one into a.next, holding
// a.mu: the callers taking from the current batch go on meanwhile, and
// one that finds it run out waits for this batch rather than encoding
// another. An error is left for moveOn, which encodes the batch itself
// and returns it.
func (g *Generator) prepare(ctx context.Context, tag string, key *Key, a *ahead) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next.Load() != nil {
		return
	}
	if e, err := g.encode(ctx, tag, key); err == nil {
		a.next.Store(e)
	}
}

// moveOn replaces a's batch done, which ran out, with the one prepared,
// or encodes one if none is; unless another caller moved on while this
// one waited for the lock.
func (g *Generator) moveOn(ctx context.Context, tag string, key *Key, a *ahead, done *encoded) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur.Load() != done {
		return nil
	}
	e := a.next.Swap(nil)
	if e == nil {
		var err error
		if e, err = g.encode(ctx, tag, key); err != nil {
			return err
		}
	}
	a.cur.Store(e)
	return nil
}

// encode takes Ahead of tag's IDs and encodes them under key.
func (g *Generator) encode(ctx context.Context, tag string, key *Key) (*encoded, error) {
	ids, err := g.g.NextN(ctx, tag, Ahead)
	if err != nil {
		return nil, err
	}
	if err := key.EncodeN(tag, ids); err != nil {
		return nil, err
	}
	return &encoded{ids: ids}, nil
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
	if err := k.key.EncodeN(tag, ids); err != nil {
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

// RangeReleaser is the part of *segment.Allocator that takes back the
// unused end of a range.
type RangeReleaser interface {
	ReleaseRange(ctx context.Context, tag string, from, to int64) (bool, error)
}

// ReleaseRange passes a plain tag's hand-back through to the wrapped
// generator, which must have a ReleaseRange (as *segment.Allocator has).
// Opaque tags hand out no ranges, so they have none to take back.
func (g *Generator) ReleaseRange(ctx context.Context, tag string, from, to int64) (bool, error) {
	rr, ok := g.g.(RangeReleaser)
	if !ok {
		return false, errors.New("opaque: the wrapped generator takes back no ranges")
	}
	if k, known := g.cached(tag); known {
		if err := k.allowRange(tag); err != nil {
			return false, err
		}
	}
	return rr.ReleaseRange(ctx, tag, from, to)
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
	if errors.Is(err, ErrRefused) || errors.Is(err, segment.ErrOpaqueConflict) {
		// Refused for good: a store that cannot say under which key the
		// tag's IDs are made fails closed, the tag served neither raw
		// nor under a guessed key.
		k := kind{opaque: true, err: err}
		g.kinds.Store(tag, k)
		return k, nil
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
	default:
		var err error
		if k.key, err = g.key.Under(fp); err != nil {
			k.err = fmt.Errorf("%w: tag %q was created under key %s, this instance holds %s; start every instance with the same key", ErrKeyMismatch, tag, fp, g.key.Fingerprint())
		}
	}
	g.kinds.Store(tag, k)
	return k, nil
}
