package segment_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newAlloc returns an allocator over a Memory that has tag with the
// given step, starting at 1.
func newAlloc(t testing.TB, step int64, opts segment.Options) (*segment.Allocator, *segmenttest.Memory, string) {
	t.Helper()
	st := segmenttest.NewMemory()
	tag := "order"
	if err := st.CreateTag(context.Background(), segment.Tag{Name: tag, MaxID: 1, Step: step}); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a, st, tag
}

// waitCounter counts callers that found both buffers empty.
type waitCounter struct {
	waits, loads, failed atomic.Int64
}

func (w *waitCounter) WaitedForLoad(string) { w.waits.Add(1) }
func (w *waitCounter) SegmentLoaded(_ string, _ int64, _ time.Duration, err error) {
	w.loads.Add(1)
	if err != nil {
		w.failed.Add(1)
	}
}

func TestAllocator_Next_UniqueAndIncreasingUnderContention(t *testing.T) {
	workers, each := 64, 20000
	if testing.Short() {
		each = 2000
	}
	// Step 10 forces a switch every few calls, so the switching path,
	// not just the atomic add, is what gets exercised.
	a, st, tag := newAlloc(t, 10, segment.Options{FixedStep: true})
	ctx := context.Background()
	ids := segmenttest.CheckUnique(t, workers, each, func() (int64, error) { return a.Next(ctx, tag) })
	t.Logf("%d IDs, %d segments reserved", len(ids), st.Reservations())
}

func TestAllocator_NextN_SpansSegments(t *testing.T) {
	a, _, tag := newAlloc(t, 10, segment.Options{FixedStep: true})
	ctx := context.Background()
	first, err := a.Next(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := a.NextN(ctx, tag, 25)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 25 {
		t.Fatalf("got %d IDs, want 25", len(ids))
	}
	prev := first
	for _, id := range ids {
		if id <= prev {
			t.Fatalf("NextN IDs %v not strictly increasing after %d", ids, first)
		}
		prev = id
	}
	if _, err := a.NextN(ctx, tag, 0); !errors.Is(err, segment.ErrInvalidCount) {
		t.Fatalf("NextN(0): err = %v, want ErrInvalidCount", err)
	}
}

func TestAllocator_NextN_ParallelUnique(t *testing.T) {
	a, _, tag := newAlloc(t, 10, segment.Options{})
	ctx := context.Background()
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 200 {
				ids, err := a.NextN(ctx, tag, 7)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if d := segmenttest.Duplicates(all); d != 0 || len(all) != 16*200*7 {
		t.Fatalf("%d IDs with %d duplicates, want %d and 0", len(all), d, 16*200*7)
	}
}

// In a synctest bubble: the store's 50 ms and the consumer's pace are
// fake time, so the test measures the ratio, not the machine.
func TestAllocator_PrefetchHidesStoreLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &waitCounter{}
		a, st, tag := newAlloc(t, 1000, segment.Options{Observer: obs})
		st.SetDelay(50 * time.Millisecond)
		ctx := context.Background()
		// A steady consumer: about 5 IDs per millisecond, so the 90% of a
		// segment left after the prefetch point lasts well over the 50 ms a
		// load takes.
		const total = 4000
		for i := range total {
			if _, err := a.Next(ctx, tag); err != nil {
				t.Fatal(err)
			}
			if i%5 == 4 {
				time.Sleep(time.Millisecond) // the consumer's pace, in the bubble's fake time
			}
		}
		// The first segment has nothing to prefetch behind it: exactly one wait.
		if w := obs.waits.Load(); w != 1 {
			t.Fatalf("%d calls waited for a load, want 1 (the first segment only); %d loads", w, obs.loads.Load())
		}
		t.Logf("%d IDs, %d loads, %d waits", total, obs.loads.Load(), obs.waits.Load())
	})
}

// Time is the bubble's: a caller answered during the backoff is answered
// at once exactly, not within a wall-clock guess.
func TestAllocator_StoreFailureIsUnavailableAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, st, tag := newAlloc(t, 10, segment.Options{FixedStep: true, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
		ctx := context.Background()
		if _, err := a.Next(ctx, tag); err != nil {
			t.Fatal(err)
		}
		cause := errors.New("connection refused")
		st.SetError(cause)
		var err error
		for range 100 { // drain both buffers
			if _, err = a.Next(ctx, tag); err != nil {
				break
			}
		}
		if !errors.Is(err, segment.ErrUnavailable) || !errors.Is(err, cause) {
			t.Fatalf("err = %v, want ErrUnavailable wrapping the cause", err)
		}
		// During backoff callers are answered at once, without touching the
		// store (once the allocator's own loads have settled).
		synctest.Wait()
		calls := st.Calls()
		start := time.Now()
		_, err2 := a.Next(ctx, tag)
		if !errors.Is(err2, segment.ErrUnavailable) {
			t.Fatalf("second call: err = %v, want ErrUnavailable", err2)
		}
		if waited := time.Since(start); waited != 0 || st.Calls() != calls {
			t.Fatalf("a failing store made the caller wait %v and call it %d times", waited, st.Calls()-calls)
		}
		st.SetError(nil)
		if err := testtime.WaitFor(5*time.Second, time.Millisecond, func() error {
			_, err := a.Next(ctx, tag)
			return err
		}); err != nil {
			t.Fatalf("no recovery after the store healed: %v", err)
		}
		if st.Calls() <= calls {
			t.Fatal("the allocator never retried the store")
		}
	})
}

func TestAllocator_DynamicStep(t *testing.T) {
	clock := testtime.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := segment.Options{PrefetchRatio: 0.5}
	segment.SetClock(&opts, clock.Now)
	a, _, tag := newAlloc(t, 100, opts)
	seq, err := a.Sequence(tag)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// drain consumes the current segment after advancing the clock by
	// lasted, and returns the step of the segment loaded next.
	drain := func(lasted time.Duration) int64 {
		t.Helper()
		clock.Advance(lasted)
		st := seq.Stats()
		for range st.Current.End - st.Current.Pos {
			if _, err := seq.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if !testtime.Until(5*time.Second, time.Millisecond, func() bool { return seq.Stats().Next != nil }) {
			t.Fatal("next segment never loaded")
		}
		n := seq.Stats().Next
		if _, err := seq.Next(ctx); err != nil { // switch to it
			t.Fatal(err)
		}
		return n.End - n.Start
	}
	if _, err := seq.Next(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lasted time.Duration
		want   int64
	}{
		{time.Minute, 200},      // fast: double
		{time.Minute, 400},      // fast again
		{20 * time.Minute, 400}, // between 15 and 30 minutes: keep
		{time.Hour, 200},        // slow: halve
		{time.Hour, 100},        // slow again
		{time.Hour, 100},        // never below the row's step
	} {
		if got := drain(tc.lasted); got != tc.want {
			t.Fatalf("after a segment that lasted %v: step %d, want %d", tc.lasted, got, tc.want)
		}
	}
}

func TestAllocator_ContextCancelWhileWaiting(t *testing.T) {
	a, st, tag := newAlloc(t, 10, segment.Options{WaitTimeout: time.Minute})
	st.SetDelay(time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := a.Next(ctx, tag)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("returned after %v, want promptly after the context ended", d)
	}
}

func TestAllocator_WaitTimeout(t *testing.T) {
	a, st, tag := newAlloc(t, 10, segment.Options{WaitTimeout: 20 * time.Millisecond})
	st.SetDelay(time.Minute)
	if _, err := a.Next(context.Background(), tag); !errors.Is(err, segment.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable after the wait timeout", err)
	}
}

func TestAllocator_CloseWhileLoadInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := segmenttest.NewMemory()
		ctx := context.Background()
		if err := st.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1, Step: 10}); err != nil {
			t.Fatal(err)
		}
		a, err := segment.New(st, segment.Options{WaitTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		st.SetDelay(time.Minute)
		errc := make(chan error, 1)
		go func() {
			_, err := a.Next(ctx, "order")
			errc <- err
		}()
		synctest.Wait() // the caller waits for the load, which waits for the store
		if st.Calls() != 1 {
			t.Fatalf("%d reservations in flight, want 1", st.Calls())
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, segment.ErrClosed) {
			t.Fatalf("waiting caller got %v, want ErrClosed", err)
		}
		if _, err := a.Next(ctx, "order"); !errors.Is(err, segment.ErrClosed) {
			t.Fatalf("Next after Close: %v, want ErrClosed", err)
		}
	})
}

func TestAllocator_CloseHandsBackUnusedRange(t *testing.T) {
	st := segmenttest.NewMemory()
	ctx := context.Background()
	if err := st.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1, Step: 100}); err != nil {
		t.Fatal(err)
	}
	for want := int64(1); want <= 7; want += 3 {
		a, err := segment.New(st, segment.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range int64(3) {
			id, err := a.Next(ctx, "order")
			if err != nil {
				t.Fatal(err)
			}
			if id != want+i {
				t.Fatalf("id %d, want %d: the previous allocator's rest was not handed back", id, want+i)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAllocator_UnknownTags(t *testing.T) {
	ctx := context.Background()
	t.Run("AutoCreate", func(t *testing.T) {
		st := segmenttest.NewMemory()
		a, err := segment.New(st, segment.Options{AutoCreate: true, DefaultStep: 50})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		id, err := a.Next(ctx, "fresh")
		if err != nil || id != 1 {
			t.Fatalf("first ID of an auto-created tag = %d, %v; want 1", id, err)
		}
		tags, _ := st.ListTags(ctx)
		if len(tags) != 1 || tags[0].Step != 50 {
			t.Fatalf("tags = %+v, want one with step 50", tags)
		}
	})
	t.Run("NotFoundIsCached", func(t *testing.T) {
		st := segmenttest.NewMemory()
		a, err := segment.New(st, segment.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		for range 100 {
			if _, err := a.Next(ctx, "ghost"); !errors.Is(err, segment.ErrTagNotFound) {
				t.Fatalf("err = %v, want ErrTagNotFound", err)
			}
		}
		if c := st.Calls(); c != 1 {
			t.Fatalf("100 requests for an unknown tag made %d store calls, want 1", c)
		}
	})
	t.Run("InvalidBeforeIO", func(t *testing.T) {
		st := segmenttest.NewMemory()
		a, err := segment.New(st, segment.Options{AutoCreate: true})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		for _, tag := range []string{"", "a b", "ü", strings.Repeat("x", 65), "../etc", "a;DROP", ".", ".."} {
			if _, err := a.Next(ctx, tag); !errors.Is(err, segment.ErrInvalidTag) {
				t.Errorf("Next(%q): err = %v, want ErrInvalidTag", tag, err)
			}
		}
		if _, err := a.Next(ctx, strings.Repeat("x", 64)); err != nil {
			t.Errorf("64-character tag: %v", err)
		}
		// One miss and one retry after creating the 64-character tag.
		if c := st.Calls(); c != 2 {
			t.Fatalf("invalid tags reached the store: %d calls, want 2", c)
		}
	})
}

func TestNew_RejectsBadOptions(t *testing.T) {
	st := segmenttest.NewMemory()
	for _, tc := range []struct {
		name  string
		store segment.Store
		opts  segment.Options
		want  string // in the message: what to change
	}{
		{"no store", nil, segment.Options{}, "needs a Store"},
		{"negative step", st, segment.Options{DefaultStep: -1}, "DefaultStep"},
		{"negative start", st, segment.Options{DefaultStart: -1}, "DefaultStart"},
		{"negative MaxTags", st, segment.Options{MaxTags: -1}, "MaxTags"},
		{"prefetch past the end", st, segment.Options{PrefetchRatio: 1.5}, "PrefetchRatio"},
		{"negative timeout", st, segment.Options{ReleaseTimeout: -time.Second}, "timeouts"},
		{"backoffs crossed", st, segment.Options{MinBackoff: time.Second, MaxBackoff: time.Millisecond}, "MinBackoff"},
		{"negative MaxStep", st, segment.Options{MaxStep: -1}, "MaxStep"},
		{"shrink below grow", st, segment.Options{GrowBelow: time.Hour, ShrinkAbove: time.Minute}, "ShrinkAbove"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := segment.New(tc.store, tc.opts)
			if !errors.Is(err, segment.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || a != nil {
				t.Fatalf("New(%+v) = %v, %v; want ErrInvalidConfig naming %s", tc.opts, a, err, tc.want)
			}
		})
	}
}

func TestAllocator_Buffered(t *testing.T) {
	a, _, tag := newAlloc(t, 100, segment.Options{FixedStep: true})
	if n := a.Buffered(); n != 0 {
		t.Fatalf("Buffered before any use = %d, want 0", n)
	}
	for range 5 {
		if _, err := a.Next(context.Background(), tag); err != nil {
			t.Fatal(err)
		}
	}
	// 95 left in the first segment, and maybe a prefetched second one.
	if n := a.Buffered(); n != 95 && n != 195 {
		t.Fatalf("Buffered = %d, want 95 or 195", n)
	}
}
