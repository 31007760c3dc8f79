package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// FenceMargin and FenceTTL are what Fencing configures its stores with.
const (
	FenceMargin = 1_000_000
	// FenceApplied is what a fence of those stores adds to every row
	// when it found no lost fence: FenceMargin once per failover it
	// counts, at least fence.MinFailovers.
	FenceApplied = FenceMargin * fence.MinFailovers
	FenceTTL     = 2 * time.Second
)

// fenceProc is one simulated process of Fencing: a store handle of its
// own, counting the fences it performed.
type fenceProc struct {
	s      Store
	fences atomic.Int64
	last   atomic.Pointer[fence.Event]
}

// Fencing simulates the two events fencing exists for, on a store whose
// every handle open returns is a process of its own, and checks what
// the issue promises:
//
//   - a lossy failover: the tag's max_id goes back below IDs a running
//     allocator handed out, a live lease's renewal is lost, and the
//     recorded identity is another server's (on SQLite, the file's own
//     identity changes too). A fresh process and the running one go on
//     at once: one fence, max_id up by the margin, the lease held for its
//     owner, a new claim starting after the hold, and 0 duplicates
//     between the two allocators;
//   - a restore of the idgen_fence row (its generation goes back): the
//     running processes fence once between them.
//
// A process that starts after either event does not fence again.
func Fencing(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	cfg := fence.Config{Margin: FenceMargin, LeaseTTL: FenceTTL}
	newProc := func() *fenceProc {
		p := &fenceProc{s: open(t)}
		f := p.s
		if err := f.ConfigureFence(cfg, nil); err != nil {
			t.Fatal(err)
		}
		f.ObserveFences(func(ev fence.Event) { p.fences.Add(1); p.last.Store(&ev) })
		return p
	}
	db := func(p *fenceProc) *sql.DB { return p.s.DB() }
	exec := func(p *fenceProc, q string) {
		t.Helper()
		if _, err := db(p).ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	fences := func(p *fenceProc) int64 { t.Helper(); return Fences(t, db(p)) }
	maxID := func(p *fenceProc, tag string) int64 {
		t.Helper()
		var n int64
		if err := db(p).QueryRowContext(ctx, fmt.Sprintf("SELECT max_id FROM id_sequence WHERE biz_tag = '%s'", tag)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	a := newProc()
	tag := segmenttest.UniqueTag("fence")
	if err := a.s.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: 100}); err != nil {
		t.Fatal(err)
	}
	allocA, err := segment.New(a.s, segment.Options{FixedStep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer allocA.Close()
	before, err := allocA.NextN(ctx, tag, 1000)
	if err != nil {
		t.Fatal(err)
	}
	_, rec0, err := a.s.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rec0.Recorded() {
		t.Fatalf("after reservations the store recorded no identity: %+v", rec0)
	}
	// Under a's own owner, as serve's worker lease is: a lease of
	// another owner that a claimed held a's own reservations back
	// whenever a's presence had checked in last (the Guard excludes the
	// owner it checked in last), and a loaded machine failed the test.
	owner := a.s.Owner()
	lease, err := a.s.Leases().Claim(ctx, owner, time.Now(), FenceTTL, 1024)
	if err != nil {
		t.Fatal(err)
	}
	fences0 := fences(a)
	// A tag the margin would carry past the int64 limit.
	edge := segmenttest.UniqueTag("fence-edge")
	if err := a.s.CreateTag(ctx, segment.Tag{Name: edge, MaxID: math.MaxInt64 - 1000, Step: 10}); err != nil {
		t.Fatal(err)
	}

	// Renewed just before the failover: the fence holds it also when the
	// steps above took longer than its TTL on a loaded machine.
	if lease, err = a.s.Leases().Renew(ctx, lease, time.Now(), time.Now(), FenceTTL); err != nil {
		t.Fatal(err)
	}
	// The failover: the last 500 IDs' reservations are lost, and the
	// server is another history.
	back := maxID(a, tag) - 500
	exec(a, fmt.Sprintf("UPDATE id_sequence SET max_id = %d WHERE biz_tag = '%s'", back, tag))
	exec(a, "UPDATE idgen_fence SET system_id = 'another-history' WHERE id = 1")
	// A SQLite file carries its own identity in the row: another file.
	// (Other stores have no such column; their server is what it is.)
	_, _ = db(a).ExecContext(ctx, "UPDATE idgen_fence SET store_id = 'another-file' WHERE id = 1")
	began := time.Now()

	c := newProc()
	allocC, err := segment.New(c.s, segment.Options{FixedStep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer allocC.Close()
	// Both go on at once; one fences. The fence holds c's reservations
	// back (fence.Holding) until a's lease, which the fence held, has
	// been renewed against the new record: a could have seen a fence the
	// store lost, which its renewal would find. a's own lease never holds
	// a back. a renews once c has been held.
	var after, fresh []int64
	var held, cDone atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		ids, err := allocA.NextN(ctx, tag, 1000)
		if err != nil {
			t.Error(err)
		}
		after = ids
	})
	wg.Go(func() {
		defer cDone.Store(true)
		for deadline := time.Now().Add(30 * time.Second); ; {
			ids, err := allocC.NextN(ctx, tag, 1000)
			if err == nil {
				fresh = ids
				return
			}
			if !errors.Is(err, sqlstore.ErrHeld) || time.Now().After(deadline) {
				t.Errorf("the fresh process: %v", err)
				return
			}
			held.Store(true)
			time.Sleep(10 * time.Millisecond)
		}
	})
	wg.Go(func() {
		for !held.Load() && !cDone.Load() {
			time.Sleep(time.Millisecond)
		}
		l, err := a.s.Leases().Renew(ctx, lease, time.Now(), time.Now(), FenceTTL)
		if err != nil {
			t.Errorf("the holder's renewal after the fence: %v", err)
			return
		}
		lease = l
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	if !held.Load() {
		t.Fatal("the fresh process reserved after the fence before the holder of a lease the fence held had checked in")
	}
	// What let c go on: the renewal recorded the record it was checked
	// against on the lease.
	_, recNow, err := a.s.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seen int64
	if err := db(a).QueryRowContext(ctx, fmt.Sprintf("SELECT seen_generation FROM worker_node WHERE worker_id = %d", lease.WorkerID)).Scan(&seen); err != nil {
		t.Fatal(err)
	}
	if seen != recNow.Generation {
		t.Fatalf("the holder's lease after its renewal: seen_generation %d, want the record's %d", seen, recNow.Generation)
	}
	all := append(append(append([]int64{}, before...), after...), fresh...)
	if d := segmenttest.Duplicates(all); d != 0 {
		t.Fatalf("%d duplicates among %d IDs of two allocators through the failover", d, len(all))
	}
	if n := a.fences.Load() + c.fences.Load(); n != 1 {
		t.Fatalf("%d fences by the two processes, want 1", n)
	}
	if n := fences(a); n != fences0+1 {
		t.Fatalf("idgen_fence.fences = %d, want %d", n, fences0+1)
	}
	ev := a.last.Load()
	if ev == nil {
		ev = c.last.Load()
	}
	if ev.Plan.Margin != FenceApplied || ev.From.System != "another-history" {
		t.Fatalf("fence event %+v: want margin %d, from the planted identity", ev, FenceApplied)
	}
	if got := maxID(a, edge); got != math.MaxInt64 {
		t.Fatalf("a tag within the margin of the int64 limit: max_id %d after the fence, want the limit (exhausted)", got)
	}
	if _, err := a.s.Reserve(ctx, edge, 0); !errors.Is(err, segment.ErrExhausted) {
		t.Fatalf("reserve on the exhausted tag: %v, want ErrExhausted", err)
	}
	for _, id := range fresh {
		if id < back+FenceApplied {
			t.Fatalf("the fresh process issued %d, below the restored max_id %d plus the margin %d", id, back, FenceApplied)
		}
	}

	// The lease: held for its owner until the hold's end, renewable by
	// it; a new claim starts after the hold.
	workers, err := a.s.Leases().Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holdUntil := time.UnixMilli(ev.Plan.HoldUntil)
	if min := began.Add(FenceTTL); holdUntil.Before(min) {
		t.Fatalf("hold until %v, before the fence's time plus the TTL %v", holdUntil, min)
	}
	for _, w := range workers {
		if w.WorkerID == lease.WorkerID && (w.Owner != owner || w.ExpiresAt.Before(holdUntil)) {
			t.Fatalf("worker %d after the fence: owner %q until %v, want %q until %v or later", w.WorkerID, w.Owner, w.ExpiresAt, owner, holdUntil)
		}
		if w.LastTimestamp.Before(holdUntil) {
			t.Fatalf("worker %d's floor %v is below the hold's end %v", w.WorkerID, w.LastTimestamp, holdUntil)
		}
	}
	if lease, err = a.s.Leases().Renew(ctx, lease, time.Now(), time.Now(), FenceTTL); err != nil {
		t.Fatalf("the holder's renewal after the fence: %v", err)
	}
	other, err := c.s.Leases().Claim(ctx, "fence-claimer-"+tag, time.Now(), FenceTTL, 1024)
	if err != nil {
		t.Fatal(err)
	}
	// Leases left to run out would hold back the reservations of the
	// next test's fences on this database.
	defer func() {
		_ = a.s.Leases().Release(ctx, lease, time.Now())
		_ = c.s.Leases().Release(ctx, other, time.Now())
	}()
	if other.WorkerID == lease.WorkerID || other.LastTimestamp.Before(holdUntil) {
		t.Fatalf("a claim after the fence got worker %d from %v; want another than %d, from %v on", other.WorkerID, other.LastTimestamp, lease.WorkerID, holdUntil)
	}

	// A process that starts now sees the recorded identity and goes on.
	d := newProc()
	if _, err := d.s.Reserve(ctx, tag, 0); err != nil {
		t.Fatal(err)
	}
	if n := fences(d); n != fences0+1 || d.fences.Load() != 0 {
		t.Fatalf("a process started after the fence fenced again: %d fences, %d by it", n-fences0, d.fences.Load())
	}

	// The restore: the idgen_fence row goes back to an older generation,
	// which claims and renewals read (a reservation reads the server's
	// identity alone once the process has seen the record). The running
	// processes fence once between them.
	exec(a, "UPDATE idgen_fence SET generation = generation - 1 WHERE id = 1")
	for i, p := range []*fenceProc{a, c, d} {
		wg.Go(func() {
			l, err := p.s.Leases().Claim(ctx, fmt.Sprintf("fence-restore-%d-%s", i, tag), time.Now(), FenceTTL, 1024)
			if err != nil {
				t.Error(err)
				return
			}
			_ = p.s.Leases().Release(ctx, l, time.Time{})
		})
	}
	wg.Wait()
	if n := fences(a); n != fences0+2 {
		t.Fatalf("after the row went back: %d fences in all, want %d", n-fences0, 2)
	}
	if n := a.fences.Load() + c.fences.Load() + d.fences.Load(); n != 2 {
		t.Fatalf("%d fences by the processes, want 2", n)
	}
	t.Logf("fenced once per event; margin %d, hold until %v (%v after the event)", ev.Plan.Margin, holdUntil.UTC(), holdUntil.Sub(began).Round(time.Millisecond))
}

// Fences returns how many fences the store's idgen_fence row has
// counted.
func Fences(t testing.TB, db *sql.DB) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(context.Background(), "SELECT fences FROM idgen_fence WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// FenceCountsLapsedLeases checks a fence after a failover slower than
// the lease TTL: every lease has lapsed, so the fence counts those that
// were live within a TTL of the newest expiry (fence.CountSince) without
// holding them (a lapsed lease's owner has stopped stamping), marks them
// fence.MustCheckIn, and another process's reservations wait for them
// (fence.Holding) until the hold ends or their owner checks in; no other
// owner may claim them meanwhile (fence.Claimable).
func FenceCountsLapsedLeases(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	cfg := fence.Config{Margin: FenceMargin, LeaseTTL: FenceTTL}
	a, b := open(t), open(t)
	for _, s := range []Store{a, b} {
		if err := s.ConfigureFence(cfg, nil); err != nil {
			t.Fatal(err)
		}
	}
	tag := segmenttest.UniqueTag("lapsed")
	// By a process that is gone when the failover comes, with the
	// presence lease its creation took: no lease is live.
	creator := open(t)
	if err := creator.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if err := creator.Close(); err != nil {
		t.Fatal(err)
	}
	owner := "lapsed-holder-" + tag
	lease, err := a.Leases().Claim(ctx, owner, time.Now(), FenceTTL, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Leases().Release(ctx, lease, time.Now()) }()
	// The store comes back from a failover that took longer than two
	// TTLs: the lease's stored expiry is long past, and no other lease
	// has an owner.
	lapsed := time.Now().Add(-3 * FenceTTL).UnixMilli()
	for _, q := range []string{
		fmt.Sprintf("UPDATE worker_node SET owner = '' WHERE worker_id <> %d", lease.WorkerID),
		fmt.Sprintf("UPDATE worker_node SET lease_expires_at = %d WHERE worker_id = %d", lapsed, lease.WorkerID),
		"UPDATE idgen_fence SET system_id = 'another-history' WHERE id = 1",
	} {
		if _, err := a.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_, _ = a.DB().ExecContext(ctx, "UPDATE idgen_fence SET store_id = 'another-file' WHERE id = 1")
	_, err = b.Reserve(ctx, tag, 0)
	if !errors.Is(err, sqlstore.ErrHeld) {
		t.Fatalf("b's reservation after the fence: %v, want it held for the lapsed lease", err)
	}
	var expires, seen int64
	if err := a.DB().QueryRowContext(ctx, fmt.Sprintf("SELECT lease_expires_at, seen_generation FROM worker_node WHERE worker_id = %d", lease.WorkerID)).Scan(&expires, &seen); err != nil {
		t.Fatal(err)
	}
	if expires != lapsed || seen != fence.MustCheckIn {
		t.Fatalf("the lapsed lease after the fence: expiry %d, seen %d; want it not held (%d) but marked %d", expires, seen, lapsed, fence.MustCheckIn)
	}
	// A newcomer must not take it over while the hold lasts: its row
	// would carry the newcomer's check-in, and b would stop waiting for
	// an owner that may still hand out ranges the store lost (a third
	// instance started after an async failover took a live instance's
	// presence row this way, and 973 IDs were handed out twice).
	if l, err := b.Leases().ClaimRange(ctx, "newcomer-"+tag, time.Now(), FenceTTL, lease.WorkerID, lease.WorkerID+1); !errors.Is(err, snowflake.ErrNoFreeWorker) {
		t.Fatalf("a newcomer's claim of the counted lease during the hold: %+v, %v; want ErrNoFreeWorker", l, err)
	}
	if _, err := b.Reserve(ctx, tag, 0); !errors.Is(err, sqlstore.ErrHeld) {
		t.Fatalf("b's reservation after the newcomer's claim: %v, want it still held for the lapsed lease", err)
	}
	// Its worker ID claimed again by its owner: checked in.
	again, err := a.Leases().ClaimRange(ctx, owner, time.Now(), FenceTTL, lease.WorkerID, lease.WorkerID+1)
	if err != nil {
		t.Fatal(err)
	}
	lease = again
	if _, err := b.Reserve(ctx, tag, 0); err != nil {
		t.Fatalf("b's reservation once the lease was claimed again: %v", err)
	}
}
