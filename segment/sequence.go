package segment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen/idgen"
)

// buffer is one reserved segment. Its fields other than pos never change
// after it is published, so readers need no lock.
type buffer struct {
	// pos is the next value to hand out. Next's atomic add may run it past
	// end, and near the int64 limit even wrap it to a negative value, so
	// a taken value counts only if it lies in [start, end): the one check
	// that holds whatever the concurrency. AppendN moves it with a
	// compare-and-swap that never passes end.
	pos        atomic.Int64
	start, end int64
	// prefetchAt is the value whose taker starts loading the next segment.
	// Exactly one caller takes it, so the trigger needs no extra state.
	prefetchAt int64
	// again is set when the prefetch was skipped because the store was in
	// backoff; every take past prefetchAt then tries again, cheaply
	// refused until retryAt (Unix nanoseconds), so that the load starts
	// when the backoff ends rather than when the buffer runs dry.
	again    atomic.Bool
	retryAt  atomic.Int64
	loadedAt time.Time
	latency  time.Duration
}

// Sequence hands out the IDs of one tag. Get it from Allocator.Sequence.
// It is safe for concurrent use.
type Sequence struct {
	tag string
	a   *Allocator
	cur atomic.Pointer[buffer]

	mu       sync.Mutex
	next     *buffer       // loaded and waiting for cur to run out
	loading  chan struct{} // non-nil while a load is in flight; closed when it ends
	err      error         // the last load's error, returned until retryAt
	retryAt  time.Time
	backoff  time.Duration
	step     int64 // dynamic step of the last load; 0 before the first
	rowStep  int64 // the row's configured step, the floor of step
	lastLoad time.Time
	rate     float64 // IDs per second over the last segment
}

// Tag returns the sequence's tag.
func (s *Sequence) Tag() string { return s.tag }

// Next returns the next ID. It waits for a segment only when both buffers
// are empty, bounded by ctx and Options.WaitTimeout.
func (s *Sequence) Next(ctx context.Context) (int64, error) {
	for {
		b := s.cur.Load()
		if b != nil {
			v := b.pos.Add(1) - 1
			if b.start <= v && v < b.end {
				if v == b.prefetchAt || (v > b.prefetchAt && b.again.Load()) {
					s.prefetch(b)
				}
				return v, nil
			}
		}
		if err := s.advance(ctx, b); err != nil {
			return 0, err
		}
	}
}

// NextN returns n IDs in increasing order.
func (s *Sequence) NextN(ctx context.Context, n int) ([]int64, error) {
	if n < 1 {
		return nil, ErrInvalidCount
	}
	return s.AppendN(ctx, make([]int64, 0, n), n)
}

// AppendN appends n IDs to dst in increasing order and returns the
// extended slice. Each segment it touches costs one atomic add, not n. On
// error it returns dst unchanged; IDs taken for the failed batch are
// skipped, never handed out twice.
func (s *Sequence) AppendN(ctx context.Context, dst []int64, n int) ([]int64, error) {
	if n < 1 {
		return dst, ErrInvalidCount
	}
	orig := len(dst)
	left := int64(n)
	for left > 0 {
		b := s.cur.Load()
		if b != nil {
			if v, hi, ok := b.take(left); ok {
				if b.prefetchAt < hi && (v <= b.prefetchAt || b.again.Load()) {
					s.prefetch(b)
				}
				for x := v; x < hi; x++ {
					dst = append(dst, x)
				}
				left -= hi - v
				continue
			}
		}
		if err := s.advance(ctx, b); err != nil {
			return dst[:orig], err
		}
	}
	return dst, nil
}

// take claims up to n values of b, [v, hi), or reports that b is used up.
// Unlike Next's add, it never moves pos past end, so a large batch cannot
// carry pos over the int64 limit however often it is retried.
func (b *buffer) take(n int64) (v, hi int64, ok bool) {
	for {
		v = b.pos.Load()
		if v < b.start || v >= b.end {
			return 0, 0, false
		}
		hi = v + min(n, b.end-v) // end-v > 0 and no sum passes end
		if b.pos.CompareAndSwap(v, hi) {
			return v, hi, true
		}
	}
}

// prefetch starts loading the segment after b, unless one is loaded or
// loading. In a backoff it marks b, so that the first take after the
// backoff starts the load.
func (s *Sequence) prefetch(b *buffer) {
	if b.again.Load() && s.a.opts.Now().UnixNano() < b.retryAt.Load() {
		return // still in backoff: no lock taken
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b.again.Store(false)
	if s.cur.Load() != b || s.next != nil || s.loading != nil {
		return
	}
	if s.err != nil && s.a.opts.Now().Before(s.retryAt) {
		b.retryAt.Store(s.retryAt.UnixNano())
		b.again.Store(true)
		return
	}
	s.startLoadLocked()
}

// advance moves past the used-up buffer seen: it switches to the next
// buffer, or waits for the load in flight, starting one if needed. It
// returns nil when the caller should try again.
func (s *Sequence) advance(ctx context.Context, seen *buffer) error {
	var timeout <-chan time.Time
	waited := false
	for {
		s.mu.Lock()
		if s.a.isClosed() {
			s.mu.Unlock()
			return ErrClosed
		}
		if s.cur.Load() != seen {
			s.mu.Unlock()
			return nil // someone else switched
		}
		if s.next != nil {
			s.cur.Store(s.next)
			s.next = nil
			s.mu.Unlock()
			return nil
		}
		if s.loading == nil {
			if now := s.a.opts.Now(); s.err != nil && now.Before(s.retryAt) {
				err := s.err
				if errors.Is(err, ErrUnavailable) {
					err = idgen.WithRetryAfter(err, s.retryAt.Sub(now))
				}
				s.mu.Unlock()
				return err
			}
			if !s.startLoadLocked() {
				s.mu.Unlock()
				return ErrClosed
			}
		}
		done := s.loading
		s.mu.Unlock()

		if !waited {
			waited = true
			if obs := s.a.opts.Observer; obs != nil {
				obs.WaitedForLoad(s.tag)
			}
			t := time.NewTimer(s.a.opts.WaitTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("segment: waiting for a segment of %q: %w", s.tag, ctx.Err())
		case <-timeout:
			return fmt.Errorf("%w: tag %q: no segment within %v", ErrUnavailable, s.tag, s.a.opts.WaitTimeout)
		}
	}
}

// startLoadLocked starts one background reservation. s.mu must be held.
func (s *Sequence) startLoadLocked() bool {
	done := make(chan struct{})
	step := s.nextStepLocked(s.a.opts.Now())
	ok := s.a.startLoad(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, s.a.opts.LoadTimeout)
		began := s.a.opts.Now()
		t0 := time.Now()
		r, err := s.a.reserve(ctx, s.tag, step)
		latency := time.Since(t0)
		cancel()
		if obs := s.a.opts.Observer; obs != nil {
			obs.SegmentLoaded(s.tag, r.Size(), latency, err)
		}
		s.finishLoad(r, err, began, latency)
		close(done)
	})
	if ok {
		s.loading = done
	}
	return ok
}

// finishLoad records a load's outcome and clears the in-flight mark.
func (s *Sequence) finishLoad(r Range, err error, began time.Time, latency time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loading = nil
	o := &s.a.opts
	if err != nil {
		switch {
		case errors.Is(err, ErrTagNotFound):
			s.err = fmt.Errorf("%w: %q", ErrTagNotFound, s.tag)
			s.retryAt = began.Add(o.NegativeTTL)
		case s.a.isClosed():
			s.err = ErrClosed
		case errors.Is(err, ErrRefused):
			s.err = err
			s.backoff = o.MaxBackoff
			s.retryAt = s.a.opts.Now().Add(s.backoff)
			o.Logger.Warn("segment load refused", "tag", s.tag, "retry_in", s.backoff, "err", err)
		default:
			if errors.Is(err, ErrExhausted) {
				s.backoff = o.MaxBackoff
			} else {
				s.backoff = min(max(2*s.backoff, o.MinBackoff), o.MaxBackoff)
			}
			s.err = fmt.Errorf("%w: tag %q: %w", ErrUnavailable, s.tag, err)
			s.retryAt = s.a.opts.Now().Add(s.backoff)
			if b := s.cur.Load(); b != nil {
				// A failed prefetch is tried again after the backoff.
				b.retryAt.Store(s.retryAt.UnixNano())
				b.again.Store(true)
			}
			o.Logger.Warn("segment load failed", "tag", s.tag, "retry_in", s.backoff, "err", err)
		}
		return
	}
	if s.err != nil && !errors.Is(s.err, ErrTagNotFound) {
		o.Logger.Info("segment load recovered", "tag", s.tag)
	}
	s.err, s.backoff = nil, 0
	if !s.lastLoad.IsZero() && s.step > 0 {
		if d := began.Sub(s.lastLoad); d > 0 {
			s.rate = float64(s.step) / d.Seconds()
		}
	}
	s.step, s.rowStep, s.lastLoad = r.Size(), r.Step, began
	b := &buffer{start: r.Start, end: r.End, loadedAt: began, latency: latency}
	b.pos.Store(r.Start)
	b.prefetchAt = r.Start + int64(float64(r.Size())*o.PrefetchRatio)
	s.next = b
}

// nextStepLocked picks the size of the next reservation from how long the
// previous segment lasted, as Leaf does: short-lived segments double, long
// ones halve, never below the row's step nor above MaxStep.
func (s *Sequence) nextStepLocked(now time.Time) int64 {
	o := &s.a.opts
	if s.step == 0 || o.FixedStep {
		return 0 // the store uses the row's step
	}
	lasted := now.Sub(s.lastLoad)
	switch {
	case lasted < o.GrowBelow:
		if s.step <= o.MaxStep/2 {
			return s.step * 2
		}
		return max(s.step, min(o.MaxStep, s.step*2))
	case lasted <= o.ShrinkAbove:
		return s.step
	default:
		return max(s.step/2, s.rowStep)
	}
}

// span is an unused range that fence took out of circulation.
type span struct {
	tag      string
	from, to int64
}

// fence stops both buffers from handing out more IDs and returns their
// unused ranges, latest reservation first, so that they can be handed
// back in the order the store's compare-and-set needs.
func (s *Sequence) fence() []span {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []span
	for _, b := range []*buffer{s.next, s.cur.Load()} {
		if b == nil {
			continue
		}
		// After the swap every taker sees a used-up buffer, so the rest
		// [old, end) can never be handed out by this process.
		if old := b.pos.Swap(b.end); b.start <= old && old < b.end {
			out = append(out, span{tag: s.tag, from: old, to: b.end})
		}
	}
	s.next = nil
	return out
}

func (s *Sequence) nextBuffer() *buffer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// SequenceStats is a snapshot of one tag's buffers for monitoring.
type SequenceStats struct {
	Tag         string
	Current     BufferStats
	Next        *BufferStats // nil when the next segment is not loaded
	Loading     bool
	Step        int64   // dynamic step of the last load
	RowStep     int64   // the row's configured step
	Rate        float64 // IDs per second over the last segment
	LastLoad    time.Time
	LastLatency time.Duration
	LastError   string
	// LastErr is the error LastError spells, for errors.Is: the text may
	// hold a driver's detail, which monitoring answers must not show.
	LastErr error
}

// BufferStats describes one segment: Pos is the next ID it would hand out.
type BufferStats struct {
	Start, End, Pos int64
}

// Stats returns a snapshot of the sequence.
func (s *Sequence) Stats() SequenceStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SequenceStats{
		Tag: s.tag, Loading: s.loading != nil, Step: s.step, RowStep: s.rowStep,
		Rate: s.rate, LastLoad: s.lastLoad,
	}
	if s.err != nil {
		st.LastError, st.LastErr = s.err.Error(), s.err
	}
	if b := s.cur.Load(); b != nil {
		st.Current = b.stats()
		st.LastLatency = b.latency
	}
	if s.next != nil {
		n := s.next.stats()
		st.Next = &n
		st.LastLatency = s.next.latency
	}
	return st
}

func (b *buffer) stats() BufferStats {
	return BufferStats{Start: b.start, End: b.end, Pos: b.clampedPos()}
}

// clampedPos is pos within [start, end]: a pos that ran past end, or
// wrapped, means used up.
func (b *buffer) clampedPos() int64 {
	p := b.pos.Load()
	if p < b.start || p > b.end {
		return b.end
	}
	return p
}
