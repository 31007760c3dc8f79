package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/internal/testtime"
)

type counts struct {
	mu                     sync.Mutex
	stored, replays, swept int
	conflicts              map[string]int
	live, expired          int64
}

func (o *counts) KeyStored() { o.mu.Lock(); o.stored++; o.mu.Unlock() }
func (o *counts) Replayed()  { o.mu.Lock(); o.replays++; o.mu.Unlock() }
func (o *counts) Conflict(r string) {
	o.mu.Lock()
	if o.conflicts == nil {
		o.conflicts = map[string]int{}
	}
	o.conflicts[r]++
	o.mu.Unlock()
}
func (o *counts) Swept(n int, live, expired int64, _ error) {
	o.mu.Lock()
	o.swept += n
	o.live, o.expired = live, expired
	o.mu.Unlock()
}

func newKeeper(t *testing.T, cfg idempotency.Config) (*idempotency.Keeper, *testtime.Clock, *idempotency.Memory, *counts) {
	t.Helper()
	c := testtime.New(time.Unix(1_700_000_000, 0))
	m := idempotency.NewMemory()
	o := &counts{}
	cfg.Now, cfg.Observer = c.Now, o
	k, err := idempotency.New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k, c, m, o
}

func req(key, fp string) idempotency.Request {
	return idempotency.Request{Scope: idempotency.AnonymousScope, Key: key, Fingerprint: fp}
}

var ok200 = idempotency.Answer{Status: 200, ContentType: "application/json", Body: []byte(`{"tag":"t","id":"7"}`)}

func win(t *testing.T, k *idempotency.Keeper, r idempotency.Request) *idempotency.Ticket {
	t.Helper()
	tk, ans, err := k.Begin(context.Background(), r)
	if err != nil || ans != nil || tk == nil {
		t.Fatalf("Begin %q: ticket %v answer %v err %v; want a ticket", r.Key, tk, ans, err)
	}
	return tk
}

func TestKeeper_ReplayReusedInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, c, _, o := newKeeper(t, idempotency.Config{InFlightWait: -1})
	tk := win(t, k, req("k1", "fp"))

	// While in flight: the same request waits, another one is refused.
	_, _, err := k.Begin(ctx, req("k1", "fp"))
	var inFlight *idempotency.InFlightError
	if !errors.As(err, &inFlight) || !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("repeat in flight: %v; want an InFlightError", err)
	}
	// The wait fits the lock's age: a second for a fresh one, not the
	// whole lock.
	if got := inFlight.RetryAfter(); got != time.Second {
		t.Errorf("RetryAfter %v of a fresh lock; want 1s", got)
	}
	c.Advance(3 * time.Second)
	if _, _, err := k.Begin(ctx, req("k1", "fp")); !errors.As(err, &inFlight) || inFlight.RetryAfter() != 3*time.Second {
		t.Errorf("RetryAfter of a lock 3s old: %v; want 3s", err)
	}
	if _, _, err := k.Begin(ctx, req("k1", "other")); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("other request in flight: %v; want ErrKeyReused", err)
	}

	got, replayed, err := tk.Complete(ctx, ok200)
	if err != nil || replayed || string(got.Body) != string(ok200.Body) {
		t.Fatalf("Complete: %v %v %v", got, replayed, err)
	}
	for range 3 {
		_, ans, err := k.Begin(ctx, req("k1", "fp"))
		if err != nil || ans == nil || string(ans.Body) != string(ok200.Body) || ans.Status != 200 || ans.ContentType != ok200.ContentType {
			t.Fatalf("replay: %+v %v", ans, err)
		}
	}
	if _, _, err := k.Begin(ctx, req("k1", "other")); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("other request after: %v; want ErrKeyReused", err)
	}
	// Scopes are separate: the same key of another caller is new.
	other := req("k1", "other")
	other.Scope = "digest-of-another-token"
	win(t, k, other)
	if o.stored != 1 || o.replays != 3 || o.conflicts["reused"] != 2 || o.conflicts["in_flight"] != 2 {
		t.Errorf("observed %+v", o)
	}
}

func TestKeeper_AbandonLetsARetryAllocate(t *testing.T) {
	t.Parallel()
	k, _, m, _ := newKeeper(t, idempotency.Config{})
	win(t, k, req("k", "fp")).Abandon(context.Background())
	if m.Len() != 0 {
		t.Fatalf("%d rows after Abandon; want 0", m.Len())
	}
	win(t, k, req("k", "fp"))
}

// A failed first request gives its slot of the cap back: with a cap of
// 2, abandoning and retrying one key many times never reaches the cap.
func TestKeeper_AbandonFreesItsSlotOfTheCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, _, _, _ := newKeeper(t, idempotency.Config{MaxKeys: 2})
	for range 5 {
		win(t, k, req("k", "fp")).Abandon(ctx)
	}
	win(t, k, req("a", "fp"))
	if _, _, err := k.Begin(ctx, req("b", "fp")); err != nil {
		t.Fatalf("second live key under a cap of 2 after 5 abandoned tries: %v", err)
	}
	if _, _, err := k.Begin(ctx, req("c", "fp")); !errors.Is(err, idempotency.ErrKeyLimit) {
		t.Fatalf("third live key: %v; want ErrKeyLimit", err)
	}
}

// A winner that outlives its lock (a crash, a stall) loses the key to
// the next request; when it comes back it answers what the row holds,
// never its own IDs.
func TestKeeper_LockTimeoutTakeOverAndTheOldWinnerReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, c, _, _ := newKeeper(t, idempotency.Config{LockTimeout: 5 * time.Second})
	old := win(t, k, req("k", "fp"))
	c.Advance(4 * time.Second)
	_, _, err := k.Begin(ctx, req("k", "fp"))
	var inFlight *idempotency.InFlightError
	if !errors.As(err, &inFlight) || inFlight.RetryAfter() != time.Second {
		t.Fatalf("before the lock expired: %v; want in flight, retry after 1s", err)
	}
	c.Advance(time.Second)
	next := win(t, k, req("k", "fp"))

	// The old winner comes back before the new one completed: 409.
	if _, _, err := old.Complete(ctx, idempotency.Answer{Status: 200, Body: []byte("old")}); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("old winner, new one in flight: %v; want ErrInFlight", err)
	}
	if _, _, err := next.Complete(ctx, ok200); err != nil {
		t.Fatal(err)
	}
	// And after: it replays the new winner's answer.
	got, replayed, err := old.Complete(ctx, idempotency.Answer{Status: 200, Body: []byte("old")})
	if err != nil || !replayed || string(got.Body) != string(ok200.Body) {
		t.Fatalf("old winner after: %q %v %v; want the new winner's answer", got.Body, replayed, err)
	}
	// Nor can the old winner's Abandon remove the new winner's row.
	old.Abandon(ctx)
	if _, ans, err := k.Begin(ctx, req("k", "fp")); err != nil || ans == nil {
		t.Fatalf("replay after the old winner's Abandon: %v %v", ans, err)
	}
}

func TestKeeper_ExpiryAndSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, c, m, o := newKeeper(t, idempotency.Config{SweepBatch: 3})
	for i := range 100 {
		r := req("k"+string(rune('A'+i%26))+strings.Repeat("x", i/26), "fp")
		if i%2 == 0 {
			r.TTL = time.Hour
		}
		if _, _, err := win(t, k, r).Complete(ctx, ok200); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(time.Hour - time.Millisecond)
	if n, err := k.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep before expiry: %d %v", n, err)
	}
	c.Advance(time.Millisecond)
	// The expired key is a first request again, even before a sweep.
	if _, _, err := k.Begin(ctx, req("kA", "another")); err != nil {
		t.Fatalf("expired key with another request: %v; want a new first request", err)
	}
	// 49 hour-long keys are left to sweep, in batches of 3: one sweep
	// deletes them all, since its batches come back full.
	if n, err := k.Sweep(ctx); err != nil || n != 49 {
		t.Fatalf("sweep: %d (%v); want 49", n, err)
	}
	if m.Len() != 51 || o.live != 51 || o.expired != 0 {
		t.Fatalf("%d rows, %d counted live and %d expired after the sweep; want 51, 51, 0", m.Len(), o.live, o.expired)
	}
	c.Advance(idempotency.DefaultTTL)
	n, _ := k.Sweep(ctx)
	if n != 51 || m.Len() != 0 || o.live != 0 || o.swept != 100 {
		t.Fatalf("sweep of 51 keys: %d, %d left, %d live, %d swept in all", n, m.Len(), o.live, o.swept)
	}
}

func TestKeeper_Cap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, c, _, o := newKeeper(t, idempotency.Config{MaxKeys: 3, TTL: time.Minute})
	for _, key := range []string{"a", "b", "c"} {
		if _, _, err := win(t, k, req(key, "fp")).Complete(ctx, ok200); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := k.Begin(ctx, req("d", "fp")); !errors.Is(err, idempotency.ErrKeyLimit) {
		t.Fatalf("fourth key: %v; want ErrKeyLimit", err)
	}
	// Repeats of live keys still replay at the cap.
	if _, ans, err := k.Begin(ctx, req("b", "fp")); err != nil || ans == nil {
		t.Fatalf("repeat at the cap: %v %v", ans, err)
	}
	// Another scope has its own cap.
	r := req("d", "fp")
	r.Scope = "other"
	win(t, k, r)
	// The count survives a sweep that deletes nothing…
	if _, err := k.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.Begin(ctx, req("d", "fp")); !errors.Is(err, idempotency.ErrKeyLimit) {
		t.Fatalf("after a sweep of nothing: %v; want ErrKeyLimit", err)
	}
	// …and room comes back once keys expire and are swept.
	c.Advance(time.Minute)
	if _, err := k.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	win(t, k, req("d", "fp"))
	if o.conflicts["limit"] != 2 {
		t.Errorf("limit conflicts %d; want 2", o.conflicts["limit"])
	}
}

// Many concurrent first requests: exactly one wins.
func TestKeeper_ConcurrentFirstRequestsOneWinner(t *testing.T) {
	t.Parallel()
	k, _, _, _ := newKeeper(t, idempotency.Config{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 50 {
		wg.Go(func() {
			tk, _, err := k.Begin(context.Background(), req("same", "fp"))
			if err != nil && !errors.Is(err, idempotency.ErrInFlight) {
				t.Error(err)
			}
			if tk != nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d winners; want 1", wins)
	}
}

func TestKeeper_StartClose(t *testing.T) {
	t.Parallel()
	k, _, _, _ := newKeeper(t, idempotency.Config{})
	k.Start()
	k.Start()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	_ = k.Close()
}

func TestNew_RejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []idempotency.Config{
		{TTL: 8 * 24 * time.Hour},
		{MaxTTL: 8760 * time.Hour},
		{SweepBudget: -time.Second},
		{TTL: time.Millisecond},
		{LockTimeout: time.Millisecond},
		{SweepBatch: -1},
	} {
		if _, err := idempotency.New(idempotency.NewMemory(), cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// A sweep stops at its budget and reports the backlog it left, which
// the next sweeps work off.
func TestKeeper_SweepBudgetAndBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testtime.New(time.Unix(1_700_000_000, 0))
	m := idempotency.NewMemory()
	o := &counts{}
	k, err := idempotency.New(m, idempotency.Config{Now: c.Now, Observer: o, SweepBatch: 10, SweepEvery: time.Minute, SweepBudget: 5 * time.Second, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, _, err := win(t, k, req(fmt.Sprint("k", i), "fp")).Complete(ctx, ok200); err != nil {
			t.Fatal(err)
		}
	}
	// Every reading of the clock moves it a second: past the keys'
	// expiry by the sweep, and 5 statements fill the budget.
	c.Advance(time.Hour)
	c.SetStep(time.Second)
	n, err := k.Sweep(ctx)
	if err != nil || n != 50 || o.expired != 50 || o.live != 0 {
		t.Fatalf("sweep within a budget of 5 statements: %d deleted (%v), %d expired left, %d live; want 50, 50, 0", n, err, o.expired, o.live)
	}
	if n, _ := k.Sweep(ctx); n != 50 || o.expired != 0 || m.Len() != 0 {
		t.Fatalf("next sweep: %d deleted, %d expired left, %d rows; want 50, 0, 0", n, o.expired, m.Len())
	}
}

// The cap counts live keys: keys that expired since the last sweep
// leave room at once, since a scope is counted again before it is
// refused (the cap of 3 serves 9 keys of 1s, 3 a second, with no sweep).
func TestKeeper_CapCountsLiveKeysBeforeItRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, c, _, o := newKeeper(t, idempotency.Config{MaxKeys: 3, TTL: time.Second})
	for i := range 9 {
		if _, _, err := win(t, k, req(fmt.Sprint("k", i), "fp")).Complete(ctx, ok200); err != nil {
			t.Fatal(err)
		}
		if i%3 == 2 {
			// Full now: refused, with a Retry-After.
			_, _, err := k.Begin(ctx, req("extra", "fp"))
			var le *idempotency.KeyLimitError
			if !errors.As(err, &le) || !errors.Is(err, idempotency.ErrKeyLimit) || le.RetryAfter() != time.Second {
				t.Fatalf("key past the cap: %v; want a KeyLimitError with a 1s wait", err)
			}
			c.Advance(time.Second)
		}
	}
	if o.conflicts["limit"] != 3 {
		t.Errorf("limit conflicts %d; want 3", o.conflicts["limit"])
	}
}

// Another instance's keys in a shared store count before the cap: the
// scope is counted again half-way to it.
func TestKeeper_CapSeesOtherInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := idempotency.NewMemory()
	c := testtime.New(time.Unix(1_700_000_000, 0))
	var ks []*idempotency.Keeper
	for range 2 {
		k, err := idempotency.New(m, idempotency.Config{MaxKeys: 100, Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	stored := 0
	for i := range 300 {
		tk, _, err := ks[i%2].Begin(ctx, req(fmt.Sprint("k", i), "fp"))
		if errors.Is(err, idempotency.ErrKeyLimit) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := tk.Complete(ctx, ok200); err != nil {
			t.Fatal(err)
		}
		stored++
	}
	// Each instance counts at half its headroom, so they overshoot by at
	// most a few keys, not by a whole cap.
	if stored < 100 || stored > 104 {
		t.Fatalf("two instances with a cap of 100 stored %d keys; want 100 to 104", stored)
	}
}

// A repeat of a key in flight waits for the first request's answer and
// replays it, rather than answering 409.
func TestKeeper_RepeatWaitsForTheFirstRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		k, _, _, o := newKeeper(t, idempotency.Config{InFlightWait: time.Minute})
		tk := win(t, k, req("k", "fp"))
		done := make(chan error, 1)
		var got *idempotency.Answer
		go func() {
			var err error
			_, got, err = k.Begin(ctx, req("k", "fp"))
			done <- err
		}()
		// Complete once the repeat has looked and waits to look again.
		synctest.Wait()
		if _, _, err := tk.Complete(ctx, ok200); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil || got == nil || string(got.Body) != string(ok200.Body) {
			t.Fatalf("waiting repeat: %v %v; want the replay", got, err)
		}
		if o.replays != 1 || o.conflicts["in_flight"] != 0 {
			t.Fatalf("observed %+v; want one replay and no in-flight conflict", o)
		}
		// And the wait is bounded by the context.
		win(t, k, req("k2", "fp"))
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, _, err := k.Begin(cctx, req("k2", "fp")); !errors.Is(err, idempotency.ErrInFlight) {
			t.Fatalf("repeat with a short context: %v; want ErrInFlight", err)
		}
	})
}
