package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idgen/idgen/idempotency"
)

// flaky is a Store whose renewals fail with err, or are refused when
// refuse is set.
type flaky struct {
	idempotency.Store
	refuse bool
	err    error
}

func (f *flaky) Renew(ctx context.Context, scope, key, owner string, until time.Time) (bool, error) {
	if f.err != nil || f.refuse {
		return false, f.err
	}
	return f.Store.Renew(ctx, scope, key, owner, until)
}

func TestDo(t *testing.T) {
	t.Parallel()
	errDown := errors.New("payments down")
	for _, tc := range []struct {
		name string
		// fails is what the first run of fn does instead of answering:
		// an error or a panic.
		fails func() error
		// again is whether a retry runs fn again.
		again bool
	}{
		{"answer is recorded", func() error { return nil }, false},
		{"error frees the key", func() error { return errDown }, true},
		{"panic frees the key", func() error { panic("boom") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, _, m, _ := newKeeper(t, idempotency.Config{InFlightWait: -1})
			ctx := context.Background()
			runs := 0
			fn := func(context.Context) (idempotency.Answer, error) {
				if runs++; runs == 1 {
					if err := tc.fails(); err != nil {
						return idempotency.Answer{}, fmt.Errorf("charge: %w", err)
					}
				}
				return idempotency.Answer{Status: 201, Body: fmt.Appendf(nil, "run %d", runs)}, nil
			}
			first := func() (a idempotency.Answer, replayed bool, panicked any, err error) {
				defer func() { panicked = recover() }()
				a, replayed, err = k.Do(ctx, req("k", "fp"), fn)
				return
			}
			a, replayed, panicked, err := first()
			switch {
			case tc.again && panicked == nil && !errors.Is(err, errDown):
				t.Fatalf("first: %q %v %v; want fn's error or panic, unchanged", a.Body, err, panicked)
			case !tc.again && (err != nil || replayed || string(a.Body) != "run 1"):
				t.Fatalf("first: %q %v %v; want run 1's answer", a.Body, replayed, err)
			}
			a, replayed, err = k.Do(ctx, req("k", "fp"), fn)
			want := "run 1"
			if tc.again {
				want = "run 2"
			}
			if err != nil || string(a.Body) != want || replayed == tc.again {
				t.Fatalf("retry: %q replayed %v %v after %d runs; want %q", a.Body, replayed, err, runs, want)
			}
			if m.Len() != 1 {
				t.Fatalf("%d rows; want the one key", m.Len())
			}
		})
	}
}

// A handler five times slower than LockTimeout runs once: its hold is
// renewed while it runs, so the retries that come every second get
// ErrInFlight rather than taking the key over, and then its answer.
func TestDo_SlowHandlerRunsOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k, err := idempotency.New(idempotency.NewMemory(), idempotency.Config{LockTimeout: time.Second, InFlightWait: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var runs atomic.Int32
		fn := func(ctx context.Context) (idempotency.Answer, error) {
			runs.Add(1)
			select {
			case <-time.After(5 * time.Second):
			case <-ctx.Done():
				return idempotency.Answer{}, context.Cause(ctx)
			}
			return ok200, nil
		}
		done := make(chan error, 1)
		go func() {
			_, _, err := k.Do(ctx, req("slow", "fp"), fn)
			done <- err
		}()
		for range 4 {
			time.Sleep(time.Second) // synctest's fake time: no wait
			if _, _, err := k.Do(ctx, req("slow", "fp"), fn); !errors.Is(err, idempotency.ErrInFlight) {
				t.Fatalf("retry while the first runs: %v; want ErrInFlight", err)
			}
		}
		if err := <-done; err != nil {
			t.Fatalf("the slow first: %v", err)
		}
		if a, replayed, err := k.Do(ctx, req("slow", "fp"), fn); err != nil || !replayed || string(a.Body) != string(ok200.Body) {
			t.Fatalf("after: %q %v %v; want the replay", a.Body, replayed, err)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("the handler ran %d times; want 1", n)
		}
	})
}

// A handler whose hold is lost is told through its context before any
// retry can take the key over: at once when a renewal finds the row no
// longer its own, at the lock's expiry when renewals fail, and at the
// key's expiry whatever the renewals.
func TestDo_HoldLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		st     func(m idempotency.Store) idempotency.Store
		ttl    time.Duration
		within time.Duration // the handler's context ends by then
	}{
		{"renewal refused", func(m idempotency.Store) idempotency.Store { return &flaky{Store: m, refuse: true} }, time.Hour, 1 * time.Second},
		{"store down", func(m idempotency.Store) idempotency.Store { return &flaky{Store: m, err: errors.New("down")} }, time.Hour, 3 * time.Second},
		{"key expires", func(m idempotency.Store) idempotency.Store { return m }, 2 * time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k, err := idempotency.New(tc.st(idempotency.NewMemory()), idempotency.Config{LockTimeout: 3 * time.Second, InFlightWait: -1})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				start := time.Now()
				r := req("lost", "fp")
				r.TTL = tc.ttl
				var ended time.Duration
				_, _, err = k.Do(ctx, r, func(ctx context.Context) (idempotency.Answer, error) {
					<-ctx.Done()
					ended = time.Since(start)
					return idempotency.Answer{}, context.Cause(ctx)
				})
				if !errors.Is(err, idempotency.ErrHoldLost) || ended > tc.within {
					t.Fatalf("the handler's context ended after %v with %v; want ErrHoldLost within %v", ended, err, tc.within)
				}
			})
		})
	}
}
