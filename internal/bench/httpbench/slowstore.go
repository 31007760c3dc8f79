package httpbench

import (
	"context"
	"sync"
	"time"

	"github.com/idgen/idgen/segment"
)

// SlowStore puts a database Delay away: it waits Delay before each
// Reserve and then delegates to Store, so that the allocator's prefetch
// has to hide a slow load. Everything else goes straight to Store.
type SlowStore struct {
	Store segment.Store
	Delay time.Duration
}

// Reserve waits Delay, or until ctx ends, then reserves from Store.
func (s *SlowStore) Reserve(ctx context.Context, tag string, step int64) (segment.Range, error) {
	t := time.NewTimer(s.Delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return segment.Range{}, ctx.Err()
	}
	return s.Store.Reserve(ctx, tag, step)
}

// CreateTag delegates to Store.
func (s *SlowStore) CreateTag(ctx context.Context, t segment.Tag) error {
	return s.Store.CreateTag(ctx, t)
}

// Release delegates to Store when it is a segment.Releaser, and otherwise
// reports that nothing was taken back.
func (s *SlowStore) Release(ctx context.Context, tag string, from, to int64) (bool, error) {
	if r, ok := s.Store.(segment.Releaser); ok {
		return r.Release(ctx, tag, from, to)
	}
	return false, nil
}

// Recorder is a segment.Observer that keeps the time of every wait and
// load, relative to Start, for the hidden-latency and ride-through
// tables.
type Recorder struct {
	start time.Time

	mu    sync.Mutex
	waits []time.Duration
	loads []Load
}

// Load is one reservation attempt seen by a Recorder.
type Load struct {
	At      time.Duration // when it ended, since the Recorder's start
	Size    int64
	Latency time.Duration
	Err     bool
}

// NewRecorder returns a Recorder whose times count from now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Reset forgets everything recorded and restarts the clock.
func (r *Recorder) Reset(start time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.start, r.waits, r.loads = start, nil, nil
}

// WaitedForLoad implements segment.Observer.
func (r *Recorder) WaitedForLoad(string) {
	r.mu.Lock()
	r.waits = append(r.waits, time.Since(r.start))
	r.mu.Unlock()
}

// SegmentLoaded implements segment.Observer.
func (r *Recorder) SegmentLoaded(_ string, size int64, latency time.Duration, err error) {
	r.mu.Lock()
	r.loads = append(r.loads, Load{At: time.Since(r.start), Size: size, Latency: latency, Err: err != nil})
	r.mu.Unlock()
}

// Waits returns the times of the waits so far.
func (r *Recorder) Waits() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.waits...)
}

// Loads returns the loads so far.
func (r *Recorder) Loads() []Load {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Load(nil), r.loads...)
}
