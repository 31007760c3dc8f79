package segment_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

// MaxTags bounds the tags an allocator holds and, with auto-create, the
// rows a flood of made-up tags can create; unknown tags that the store
// refuses give their slot back.
func TestAllocator_MaxTags(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		autoCreate bool
		range_     bool
	}{
		{"auto-create, Next", true, false},
		{"auto-create, ReserveRange", true, true},
		{"existing rows only", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const max = 5
			st := segmenttest.NewMemory()
			if !tc.autoCreate {
				for i := range 2 * max {
					if err := st.CreateTag(ctx, segment.Tag{Name: fmt.Sprintf("t%d", i), MaxID: 1, Step: 10}); err != nil {
						t.Fatal(err)
					}
				}
			}
			a, err := segment.New(st, segment.Options{AutoCreate: tc.autoCreate, MaxTags: max})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })
			get := func(tag string) error {
				if tc.range_ {
					_, err := a.ReserveRange(ctx, tag, 10)
					return err
				}
				_, err := a.Next(ctx, tag)
				return err
			}
			if !tc.autoCreate {
				// Unknown tags cost no slot once the store said no.
				for i := range 3 * max {
					if err := get(fmt.Sprintf("ghost%d", i)); !errors.Is(err, segment.ErrTagNotFound) {
						t.Fatalf("unknown tag: %v, want ErrTagNotFound", err)
					}
				}
			}
			// Concurrent first uses of 2*max tags: exactly max get in.
			var mu sync.Mutex
			ok, limited := 0, 0
			var wg sync.WaitGroup
			for i := range 2 * max {
				wg.Go(func() {
					err := get(fmt.Sprintf("t%d", i))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						ok++
					case errors.Is(err, segment.ErrTagLimit):
						limited++
					default:
						t.Errorf("t%d: %v", i, err)
					}
				})
			}
			wg.Wait()
			if ok != max || limited != max {
				t.Fatalf("%d tags served and %d refused, want %d and %d", ok, limited, max, max)
			}
			if tags, _ := st.ListTags(ctx); len(tags) != 2*max && !tc.autoCreate || tc.autoCreate && len(tags) != max {
				t.Fatalf("store holds %d rows after the flood", len(tags))
			}
			if n := len(a.Stats()); n != max {
				t.Fatalf("allocator holds %d tags, want %d", n, max)
			}
			// A held tag still works at the cap.
			for range 3 {
				if err := get(func() string {
					for _, s := range a.Stats() {
						return s.Tag
					}
					return ""
				}()); err != nil {
					t.Fatalf("held tag at the cap: %v", err)
				}
			}
		})
	}
	if _, err := segment.New(segmenttest.NewMemory(), segment.Options{MaxTags: -1}); err == nil {
		t.Fatal("MaxTags -1 accepted")
	}
}

// A store error that asking again cannot cure reaches callers as is, not
// as an outage, and the store is not asked again before MaxBackoff.
func TestAllocator_RefusedIsNotAnOutage(t *testing.T) {
	a, st, tag := newAlloc(t, 10, segment.Options{MaxBackoff: time.Minute})
	refused := fmt.Errorf("%w: token not allowed", segment.ErrRefused)
	st.SetError(refused)
	ctx := context.Background()
	for range 5 {
		if _, err := a.Next(ctx, tag); !errors.Is(err, segment.ErrRefused) || errors.Is(err, segment.ErrUnavailable) {
			t.Fatalf("Next: %v, want ErrRefused and not ErrUnavailable", err)
		}
	}
	if _, err := a.ReserveRange(ctx, tag, 5); !errors.Is(err, segment.ErrRefused) || errors.Is(err, segment.ErrUnavailable) {
		t.Fatalf("ReserveRange: %v, want ErrRefused and not ErrUnavailable", err)
	}
	if n := st.Calls(); n != 2 {
		t.Fatalf("the store was asked %d times, want 2 (one load, one range)", n)
	}
}
