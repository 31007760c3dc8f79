package segmenttest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
)

// RegressionCounter is a segment.Observer that counts regressions.
type RegressionCounter struct{ n atomic.Int64 }

// Count returns the number of regressions seen.
func (c *RegressionCounter) Count() int64 { return c.n.Load() }

// SegmentLoaded implements segment.Observer.
func (c *RegressionCounter) SegmentLoaded(string, int64, time.Duration, error) {}

// WaitedForLoad implements segment.Observer.
func (c *RegressionCounter) WaitedForLoad(string) {}

// SegmentRegressed implements segment.RegressionObserver.
func (c *RegressionCounter) SegmentRegressed(string, segment.Range, int64) { c.n.Add(1) }

// Regression lowers a tag's max_id under a running allocator, as a
// restore or a failover to a replica that lost commits would, and checks
// that no ID is handed out twice: the allocator must skip the ranges below
// what it reserved, report them, and move max_id back above them. lower
// sets max_id directly in the store's database. The store must implement
// segment.Raiser.
//
// A store may catch the regression itself, before the allocator sees a
// range below its last (a fenced SQL store does, and fences): fences,
// if set, counts what the store reported, which then stands for the
// allocator's report.
func Regression(t *testing.T, st segment.Store, lower func(ctx context.Context, tag string, maxID int64) error, fences func() int64) {
	t.Helper()
	ctx := context.Background()
	tag := UniqueTag("regress")
	if err := st.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	obs := &RegressionCounter{}
	a, err := segment.New(st, segment.Options{FixedStep: true, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	seen := map[int64]bool{}
	last := int64(0)
	take := func(n int) {
		t.Helper()
		for range n {
			id, err := a.Next(ctx, tag)
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if seen[id] || id <= last {
				t.Fatalf("ID %d handed out again or out of order (last %d)", id, last)
			}
			seen[id], last = true, id
		}
	}
	reported := func() int64 {
		n := obs.Count()
		if fences != nil {
			n += fences()
		}
		return n
	}
	take(95)
	before := reported()
	if err := lower(ctx, tag, 1); err != nil {
		t.Fatalf("lower max_id: %v", err)
	}
	take(200)
	if reported() == before {
		t.Fatal("max_id went back to 1 under the allocator, and no regression was reported")
	}
	// A new instance, which never saw the old ranges, must start above
	// them too: the allocator moved max_id back up.
	b, err := segment.New(st, segment.Options{FixedStep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	id, err := b.Next(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if seen[id] {
		t.Fatalf("a new allocator handed out %d again", id)
	}
	t.Logf("%d IDs, max_id lowered from above %d to 1, %d regressions reported, 0 duplicates; a new allocator starts at %d",
		len(seen), 95, reported()-before, id)
}
