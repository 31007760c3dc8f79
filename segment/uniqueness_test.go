package segment_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

// Two allocators share a tag that starts just below the int64 limit.
// Batches larger than what is left push each buffer's position past its
// end again and again; no ID outside a reserved range may come out of
// it, and the tag must end as exhausted, not as negative or repeated IDs.
func TestAllocator_NearInt64Limit(t *testing.T) {
	ctx := context.Background()
	st := segmenttest.NewMemory()
	const tag = "edge"
	start := int64(math.MaxInt64 - 2010)
	if err := st.CreateTag(ctx, segment.Tag{Name: tag, MaxID: start, Step: 1000}); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	take := func(p int, id int64) {
		if id < start || id == math.MaxInt64 {
			t.Fatalf("allocator %d: ID %d outside every reserved range [%d, MaxInt64)", p, id, start)
		}
		seen[id]++
	}
	var allocs []*segment.Allocator
	for p := range 2 {
		a, err := segment.New(st, segment.Options{FixedStep: true, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		allocs = append(allocs, a)
		id, err := a.Next(ctx, tag) // each holds one segment of the tag
		if err != nil {
			t.Fatal(err)
		}
		take(p, id)
	}
	for p, a := range allocs {
		for range 4 {
			ids, err := a.NextN(ctx, tag, 5000)
			if err == nil {
				t.Fatalf("allocator %d: NextN(5000) got %d IDs and no error from a tag with at most 2010 left", p, len(ids))
			}
			if len(ids) != 0 {
				t.Fatalf("allocator %d: NextN failed but returned %d IDs", p, len(ids))
			}
			if !errors.Is(err, segment.ErrExhausted) {
				t.Fatalf("allocator %d: got %v, want ErrExhausted", p, err)
			}
		}
		// Takes past the end keep failing the same way, and never wrap.
		for range 10000 {
			if id, err := a.Next(ctx, tag); err == nil {
				take(p, id)
			} else if !errors.Is(err, segment.ErrExhausted) {
				t.Fatalf("allocator %d: Next after exhaustion: %v", p, err)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
	dups := 0
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	if dups > 0 {
		t.Fatalf("%d IDs handed out more than once", dups)
	}
	tags, _ := st.ListTags(ctx)
	if tags[0].MaxID < start {
		t.Fatalf("max_id went back to %d, below the start %d", tags[0].MaxID, start)
	}
	t.Logf("%d distinct IDs from the last %d of int64, max_id %d", len(seen), math.MaxInt64-start, tags[0].MaxID)
}

// waitIdle waits until no load of tag is in flight.
func waitIdle(t *testing.T, a *segment.Allocator, tag string) {
	t.Helper()
	seq, _ := a.Sequence(tag)
	if !testtime.Until(5*time.Second, time.Millisecond, func() bool { return !seq.Stats().Loading }) {
		t.Fatal("load still in flight after 5s")
	}
}

// A prefetch that falls in a backoff is started once the backoff ends, on
// the next take, so callers still never wait for the segment after.
func TestAllocator_PrefetchRetriedAfterBackoff(t *testing.T) {
	clock := testtime.New(time.Unix(1_700_000_000, 0))
	obs := &waitCounter{}
	opts := segment.Options{FixedStep: true, Observer: obs, MinBackoff: time.Second, MaxBackoff: time.Second}
	segment.SetClock(&opts, clock.Now)
	a, st, tag := newAlloc(t, 100, opts)
	ctx := context.Background()
	next := func(n int) {
		t.Helper()
		for range n {
			if _, err := a.Next(ctx, tag); err != nil {
				t.Fatal(err)
			}
		}
	}
	next(1) // the first segment: the one wait allowed
	st.SetError(errors.New("connection reset"))
	next(10) // the 11th ID is the prefetch point: that load fails
	waitIdle(t, a, tag)
	st.SetError(nil)
	next(10) // still in backoff: no load
	clock.Advance(2 * time.Second)
	next(10) // backoff over: the next take starts the prefetch
	waitIdle(t, a, tag)
	next(169) // the rest of this segment and into the next one
	if w := obs.waits.Load(); w != 1 {
		t.Fatalf("%d calls waited for a segment, want 1 (the first); %d loads, %d failed", w, obs.loads.Load(), obs.failed.Load())
	}
}

func TestCheckTag(t *testing.T) {
	for _, tc := range []struct {
		name string
		tag  segment.Tag
		want error
	}{
		{"ok", segment.Tag{Name: "a", MaxID: 1, Step: 1000}, nil},
		{"start 0", segment.Tag{Name: "a", MaxID: 0, Step: 1}, segment.ErrInvalidStep},
		{"highest start", segment.Tag{Name: "a", MaxID: math.MaxInt64 - 1000, Step: 1000}, nil},
		{"start past the last step", segment.Tag{Name: "a", MaxID: math.MaxInt64 - 999, Step: 1000}, segment.ErrInvalidStep},
		{"start MaxInt64", segment.Tag{Name: "a", MaxID: math.MaxInt64, Step: 1}, segment.ErrInvalidStep},
		{"negative start", segment.Tag{Name: "a", MaxID: -1, Step: 1}, segment.ErrInvalidStep},
		{"step 0", segment.Tag{Name: "a", MaxID: 1, Step: 0}, segment.ErrInvalidStep},
		{"step over INT", segment.Tag{Name: "a", MaxID: 1, Step: math.MaxInt32 + 1}, segment.ErrInvalidStep},
		{"NUL in description", segment.Tag{Name: "a", MaxID: 1, Step: 1, Description: "a\x00b"}, segment.ErrInvalidDescription},
		{"invalid UTF-8 description", segment.Tag{Name: "a", MaxID: 1, Step: 1, Description: "a\xffb"}, segment.ErrInvalidDescription},
		{"257-character description", segment.Tag{Name: "a", MaxID: 1, Step: 1, Description: strings.Repeat("é", 257)}, segment.ErrInvalidDescription},
		{"bad name", segment.Tag{Name: "a b", MaxID: 1, Step: 1}, segment.ErrInvalidTag},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.tag.Validate()
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Validate(%+v) = %v, want %v", tc.tag, err, tc.want)
			}
		})
	}
}

// gatedStore has one tag that exists once created by the test; its first
// Reserve waits at the gate.
type gatedStore struct {
	mu     sync.Mutex
	exists bool
	max    int64
	calls  int
	gate   chan struct{}
}

func (g *gatedStore) Reserve(ctx context.Context, tag string, step int64) (segment.Range, error) {
	g.mu.Lock()
	g.calls++
	first := g.calls == 1
	g.mu.Unlock()
	if first {
		<-g.gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.exists {
		return segment.Range{}, segment.ErrTagNotFound
	}
	r := segment.Range{Start: g.max, End: g.max + 100, Step: 100}
	g.max = r.End
	return r, nil
}

func (g *gatedStore) CreateTag(context.Context, segment.Tag) error { return nil }

// A reservation in flight while another call finds the tag missing (and
// drops its Sequence) must still count towards the tag's high-water mark:
// after a rollback, the next Sequence of the tag must not hand its range
// out again.
func TestAllocator_RegressionAcrossDroppedSequence(t *testing.T) {
	st := &gatedStore{max: 100, gate: make(chan struct{})}
	a, err := segment.New(st, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	got := make(chan segment.Range, 1)
	go func() {
		r, err := a.ReserveRange(ctx, "t", 1)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	if !testtime.Until(time.Minute, time.Millisecond, func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.calls == 1
	}) {
		t.Fatal("the first Reserve never reached the gate")
	}
	if _, err := a.ReserveRange(ctx, "t", 1); !errors.Is(err, segment.ErrTagNotFound) {
		t.Fatalf("second ReserveRange: %v, want ErrTagNotFound", err)
	}
	st.mu.Lock()
	st.exists = true
	st.mu.Unlock()
	close(st.gate)
	r := <-got
	st.mu.Lock()
	st.max = r.Start // a restore: the range is handed out again
	st.mu.Unlock()
	seq, _ := a.Sequence("t")
	id, err := seq.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Start <= id && id < r.End {
		t.Fatalf("Next gave %d, inside [%d,%d) that ReserveRange handed out before the rollback", id, r.Start, r.End)
	}
}
