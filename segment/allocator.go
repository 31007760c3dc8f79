package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen/idgen"
)

// Allocator hands out IDs for any number of tags from one Store. It is
// safe for concurrent use. Create it with New and stop it with Close.
type Allocator struct {
	store Store
	opts  Options

	// tags maps a tag name to its *Sequence (tagtable.go). Entries are
	// only added for valid tags, so the hot path can skip validation on a
	// hit. held counts them, for Options.MaxTags.
	tags tagTable
	held atomic.Int64

	// life guards closed against loads being started while Close waits
	// for the ones in flight.
	life   sync.RWMutex
	closed bool
	loads  sync.WaitGroup
	ctx    context.Context // cancelled by Close; parent of every load
	cancel context.CancelFunc

	negMu sync.Mutex
	neg   map[string]time.Time // unknown tag -> remembered until

	// marks remembers, per tag, the ranges reserved for it (watermark),
	// apart from the tag's Sequence, which is dropped when the row is
	// missing and made again later: a tag has one while a reservation is
	// in flight and once one succeeded.
	marksMu sync.Mutex
	marks   map[string]*watermark
}

// maxNegative bounds the negative cache so that a flood of distinct
// unknown tags costs bounded memory.
const maxNegative = 4096

// New returns an Allocator that reserves segments from store. It checks
// opts once, returning an error wrapping ErrInvalidConfig that says what
// to change, and does no I/O: the first segment of a tag is reserved on
// its first use.
func New(store Store, opts Options) (*Allocator, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: New needs a Store", ErrInvalidConfig)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Allocator{store: store, opts: o, ctx: ctx, cancel: cancel, neg: make(map[string]time.Time), marks: make(map[string]*watermark)}
	a.tags.init()
	return a, nil
}

// Sequence returns the handle of tag, for callers that take many IDs of
// one tag and want to skip the lookup. Handles are shared: two calls with
// the same tag return the same *Sequence. It does no I/O.
func (a *Allocator) Sequence(tag string) (*Sequence, error) {
	if s, ok := a.tags.load(tag); ok {
		return s, nil
	}
	if err := idgen.CheckTag(tag); err != nil {
		return nil, err
	}
	// Take the slot first, so that concurrent new tags cannot overshoot.
	if n := a.held.Add(1); a.opts.MaxTags > 0 && n > int64(a.opts.MaxTags) {
		a.held.Add(-1)
		if s, ok := a.tags.load(tag); ok { // added meanwhile by someone else
			return s, nil
		}
		return nil, fmt.Errorf("%w (%d): %q", ErrTagLimit, a.opts.MaxTags, tag)
	}
	s, loaded := a.tags.loadOrStore(tag, &Sequence{tag: tag, a: a})
	if loaded {
		a.held.Add(-1)
	}
	return s, nil
}

// Next returns the next ID of tag. See the package documentation for the
// guarantees.
func (a *Allocator) Next(ctx context.Context, tag string) (int64, error) {
	s := a.tags.get(tag) // inlined: a known tag costs no call to find
	if s == nil {
		var err error
		if s, err = a.sequenceSlow(tag); err != nil {
			return 0, err
		}
	}
	id, err := s.Next(ctx)
	if err != nil {
		a.forgetIfUnknown(tag, s, err)
	}
	return id, err
}

// NextN returns n IDs of tag in increasing order. A batch may span
// segments, so the IDs need not be contiguous.
func (a *Allocator) NextN(ctx context.Context, tag string, n int) ([]int64, error) {
	s, err := a.sequenceFor(tag)
	if err != nil {
		return nil, err
	}
	ids, err := s.NextN(ctx, n)
	if err != nil {
		a.forgetIfUnknown(tag, s, err)
	}
	return ids, err
}

// sequenceFor is Sequence plus the negative cache, which only applies to
// lookups by name: a handle someone holds is not dropped.
func (a *Allocator) sequenceFor(tag string) (*Sequence, error) {
	if s := a.tags.get(tag); s != nil {
		return s, nil
	}
	return a.sequenceSlow(tag)
}

// sequenceSlow is sequenceFor for a tag not in the table's read map: a
// new tag, or one not promoted yet. Apart from sequenceFor, so that the
// lookup of a known tag inlines into Next and sequenceFor.
func (a *Allocator) sequenceSlow(tag string) (*Sequence, error) {
	if s, ok := a.tags.loadRecent(tag); ok {
		return s, nil
	}
	if err := idgen.CheckTag(tag); err != nil {
		return nil, err
	}
	a.negMu.Lock()
	until, known := a.neg[tag]
	a.negMu.Unlock()
	if known && a.opts.Now().Before(until) {
		return nil, fmt.Errorf("%w: %q", ErrTagNotFound, tag)
	}
	return a.Sequence(tag)
}

// forgetIfUnknown drops the handle of a tag the store does not know, so
// that unknown tags do not pile up in the map, and remembers the miss.
func (a *Allocator) forgetIfUnknown(tag string, s *Sequence, err error) {
	if err == nil || !errors.Is(err, ErrTagNotFound) {
		return
	}
	if a.tags.compareAndDelete(tag, s) {
		a.held.Add(-1)
	}
	now := a.opts.Now()
	a.negMu.Lock()
	defer a.negMu.Unlock()
	if len(a.neg) >= maxNegative {
		for k, until := range a.neg {
			if !now.Before(until) {
				delete(a.neg, k)
			}
		}
		if len(a.neg) >= maxNegative {
			clear(a.neg)
		}
	}
	a.neg[tag] = now.Add(a.opts.NegativeTTL)
}

// Close stops background loads, refuses further calls with ErrClosed, and
// hands the unused rest of each tag's segments back to the store when the
// store supports it and nothing has reserved past them. It waits for loads
// in flight and spends at most Options.ReleaseTimeout on hand-backs.
func (a *Allocator) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.ReleaseTimeout)
	defer cancel()
	return a.Shutdown(ctx)
}

// Shutdown is Close with the hand-back bounded by ctx instead of
// Options.ReleaseTimeout. Calling it more than once is harmless.
func (a *Allocator) Shutdown(ctx context.Context) error {
	a.life.Lock()
	already := a.closed
	a.closed = true
	a.life.Unlock()
	if already {
		return nil
	}
	a.cancel()
	a.loads.Wait()

	// Every buffer is fenced before the first hand-back, and the tags are
	// handed back in name order, so that a slow store cannot keep IDs
	// flowing and a run can be replayed (internal/sim).
	seqs := a.tags.all()
	slices.SortFunc(seqs, func(x, y *Sequence) int { return strings.Compare(x.tag, y.tag) })
	fenced := make([][]span, len(seqs))
	for i, s := range seqs {
		fenced[i] = s.fence()
	}
	rel, _ := a.store.(Releaser)
	obs, _ := a.opts.Observer.(ReleaseObserver)
	var errs []error
	var back handBack
	for _, spans := range fenced {
		for i, r := range spans {
			if rel == nil || ctx.Err() != nil {
				back.keep(spans[i:])
				break
			}
			if ok, err := rel.Release(ctx, r.tag, r.from, r.to); err != nil {
				errs = append(errs, fmt.Errorf("segment: hand back %s [%d,%d): %w", r.tag, r.from, r.to, err))
				back.keep(spans[i:])
				break
			} else if !ok {
				back.keep(spans[i:])
				break // someone reserved past it; the earlier range cannot go back either
			}
			back.add(r)
			if obs != nil {
				obs.SegmentReleased(r.tag, r.to-r.from, true)
			}
		}
	}
	if back.tags > 0 || back.keptIDs > 0 {
		a.opts.Logger.Info("segment: handed back the unused rest of the ranges", "tags", back.tags, "ids", back.ids,
			"by_tag", back.byTag, "kept_tags", back.keptTags, "kept_ids", back.keptIDs)
	}
	return errors.Join(errs...)
}

// maxLoggedTags bounds the tags Shutdown's line names one by one.
const maxLoggedTags = 20

// handBack sums what Shutdown handed back, and what it could not: those
// IDs stay unused, a gap.
type handBack struct {
	tags, keptTags  int
	ids, keptIDs    int64
	byTag           map[string]int64 // the first maxLoggedTags tags
	lastTag, keptAt string
}

func (h *handBack) add(r span) {
	if r.tag != h.lastTag {
		h.tags++
		h.lastTag = r.tag
	}
	h.ids += r.to - r.from
	if h.byTag == nil {
		h.byTag = map[string]int64{}
	}
	if _, ok := h.byTag[r.tag]; ok || len(h.byTag) < maxLoggedTags {
		h.byTag[r.tag] += r.to - r.from
	}
}

func (h *handBack) keep(spans []span) {
	for _, r := range spans {
		if r.tag != h.keptAt {
			h.keptTags++
			h.keptAt = r.tag
		}
		h.keptIDs += r.to - r.from
	}
}

// startLoad runs fn in a goroutine owned by the allocator, unless the
// allocator is closed.
func (a *Allocator) startLoad(fn func(ctx context.Context)) bool {
	a.life.RLock()
	defer a.life.RUnlock()
	if a.closed {
		return false
	}
	a.loads.Add(1)
	go func() {
		defer a.loads.Done()
		fn(a.ctx)
	}()
	return true
}

func (a *Allocator) isClosed() bool {
	a.life.RLock()
	defer a.life.RUnlock()
	return a.closed
}

// maxRegressions bounds how many ranges below the high-water mark one
// reservation skips before it gives up with ErrRegressed.
const maxRegressions = 3

// reserve reserves a segment of s's tag, creating the tag first when
// allowed. It refuses a range the store handed out before (see
// watermark): the store went back in time and may hand out IDs this
// process has handed out already. It logs and reports the regression,
// raises max_id above everything reserved when the store can (Raiser),
// and reserves again.
func (a *Allocator) reserve(ctx context.Context, tag string, step int64) (Range, error) {
	for attempt := 1; ; attempt++ {
		high, at := a.beginReserve(tag)
		r, err := a.reserveOnce(ctx, tag, step)
		regressed, high := a.endReserve(tag, high, at, r, err == nil)
		if !regressed {
			return r, err
		}
		a.opts.Logger.Error("segment: the store handed out a range it had handed out before; skipping it",
			"tag", tag, "start", r.Start, "end", r.End, "high_water", high)
		if obs, ok := a.opts.Observer.(RegressionObserver); ok {
			obs.SegmentRegressed(tag, r, high)
		}
		if attempt == maxRegressions {
			return Range{}, fmt.Errorf("%w: tag %q: got [%d,%d) after reserving up to %d", ErrRegressed, tag, r.Start, r.End, high)
		}
		if rs, ok := a.store.(Raiser); ok {
			if _, err := rs.Raise(ctx, tag, high); err != nil {
				return Range{}, fmt.Errorf("segment: raise %q to %d after a regression: %w", tag, high, err)
			}
		}
	}
}

// beginReserve records the start of a reservation of tag in its
// watermark.
func (a *Allocator) beginReserve(tag string) (high int64, at uint64) {
	a.marksMu.Lock()
	defer a.marksMu.Unlock()
	w := a.marks[tag]
	if w == nil {
		w = &watermark{}
		a.marks[tag] = w
	}
	return w.begin()
}

// endReserve records its outcome and reports whether r is a regression,
// with the tag's high-water mark. A tag that never reserved and has
// nothing in flight is forgotten, so unknown tags cost nothing.
func (a *Allocator) endReserve(tag string, high int64, at uint64, r Range, ok bool) (bool, int64) {
	a.marksMu.Lock()
	defer a.marksMu.Unlock()
	w := a.marks[tag]
	regressed := w.end(high, at, r, ok)
	if w.idle() {
		delete(a.marks, tag)
	}
	return regressed, w.high
}

// reserveOnce is one reservation, creating the tag first when allowed.
func (a *Allocator) reserveOnce(ctx context.Context, tag string, step int64) (Range, error) {
	r, err := a.store.Reserve(ctx, tag, step)
	if err == nil || !a.opts.AutoCreate || !errors.Is(err, ErrTagNotFound) {
		return r, err
	}
	err = a.store.CreateTag(ctx, Tag{Name: tag, MaxID: a.opts.DefaultStart, Step: a.opts.DefaultStep, Opaque: a.opts.DefaultOpaque})
	if err != nil && !errors.Is(err, ErrTagExists) {
		return Range{}, err
	}
	if err == nil {
		a.warnCaseTwin(ctx, tag)
	}
	return a.store.Reserve(ctx, tag, step)
}

// warnCaseTwin logs a warning when tag, just auto-created, differs only
// in case from a tag the store already has: tags are case-sensitive, so
// /id/Order starts a counter of its own at 1 beside order's, which is
// rarely what the caller meant. Only the process that created the tag
// looks, once, so the warning is one line per tag; a store that cannot
// list its tags is not asked.
func (a *Allocator) warnCaseTwin(ctx context.Context, tag string) {
	l, ok := a.store.(interface {
		ListTags(context.Context) ([]Tag, error)
	})
	if !ok {
		return
	}
	tags, err := l.ListTags(ctx)
	if err != nil {
		return
	}
	for _, t := range tags {
		if t.Name != tag && strings.EqualFold(t.Name, tag) {
			a.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "segment: a new tag differs from an existing one only in case; tags are case-sensitive, so it counts from its own start",
				slog.String("tag", tag), slog.String("existing", t.Name))
			return
		}
	}
}

// Stats returns a snapshot of every tag the allocator has seen, sorted by
// nothing in particular. It is meant for monitoring, not for control.
func (a *Allocator) Stats() []SequenceStats {
	var out []SequenceStats
	for _, s := range a.tags.all() {
		out = append(out, s.Stats())
	}
	return out
}

// ReserveRange reserves n IDs (or the tag's step, if larger) straight
// from the store, bypassing the buffers, for callers that hand out IDs
// themselves, such as remote clients that cache ranges. The tag is
// created on first use when Options.AutoCreate is set.
func (a *Allocator) ReserveRange(ctx context.Context, tag string, n int64) (Range, error) {
	if n < 1 {
		return Range{}, ErrInvalidCount
	}
	s, err := a.sequenceFor(tag)
	if err != nil {
		return Range{}, err
	}
	// Counted as a load, so that Shutdown waits for it, and cancelled by
	// Shutdown like one: a range reserved after the hand-back would look
	// like a regression.
	a.life.RLock()
	if a.closed {
		a.life.RUnlock()
		return Range{}, ErrClosed
	}
	a.loads.Add(1)
	a.life.RUnlock()
	defer a.loads.Done()
	// Bounded like a background load, so a hung store cannot hold the
	// caller, and a connection, for as long as it hangs.
	ctx, cancel := context.WithTimeout(ctx, a.opts.LoadTimeout)
	defer cancel()
	defer context.AfterFunc(a.ctx, cancel)()
	r, err := a.reserve(ctx, tag, n)
	if err != nil && !errors.Is(err, ErrTagNotFound) && !errors.Is(err, ErrExhausted) && !errors.Is(err, ErrRefused) && ctx.Err() == nil {
		err = fmt.Errorf("%w: tag %q: %w", ErrUnavailable, tag, err)
	}
	if err != nil {
		a.forgetIfUnknown(tag, s, err)
	}
	return r, err
}

// ReleaseRange hands [from, to), the unused end of a range ReserveRange
// returned, back to the store, with the compare-and-set of Releaser: the
// tag's max_id moves back to from only if it is still to, so only while
// nobody reserved past the range, and only once. It reports whether the
// range was taken back; (false, nil) also when the store has no
// Releaser. The caller vouches that no ID of [from, to) was handed out:
// a server checks that the range is one it handed to this caller (see
// the server package). The allocator's regression check then expects
// the store to hand the span out again.
func (a *Allocator) ReleaseRange(ctx context.Context, tag string, from, to int64) (bool, error) {
	if from < 0 || to <= from {
		return false, fmt.Errorf("%w: release [%d,%d) is no range", ErrInvalidCount, from, to)
	}
	rel, ok := a.store.(Releaser)
	if !ok {
		return false, nil
	}
	a.life.RLock()
	if a.closed {
		a.life.RUnlock()
		return false, ErrClosed
	}
	a.loads.Add(1)
	a.life.RUnlock()
	defer a.loads.Done()
	ctx, cancel := context.WithTimeout(ctx, a.opts.LoadTimeout)
	defer cancel()
	a.marksMu.Lock()
	if w := a.marks[tag]; w != nil {
		w.release(from, to)
	}
	a.marksMu.Unlock()
	ok, err := rel.Release(ctx, tag, from, to)
	if err != nil {
		return false, fmt.Errorf("%w: tag %q: release [%d,%d): %w", ErrUnavailable, tag, from, to, err)
	}
	if obs, isObs := a.opts.Observer.(ReleaseObserver); ok && isObs {
		obs.SegmentReleased(tag, to-from, false)
	}
	return ok, nil
}

// Buffered returns how many IDs the allocator holds in memory across all
// tags: what it can still hand out if the store stops answering now.
func (a *Allocator) Buffered() int64 {
	var n int64
	for _, s := range a.tags.all() {
		for _, b := range []*buffer{s.cur.Load(), s.nextBuffer()} {
			if b != nil {
				n += b.end - b.clampedPos()
			}
		}
	}
	return n
}
