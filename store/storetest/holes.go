package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// Holes are the paths to a duplicate a review of the fence found (issue
// F1-F5, F11, F12 of docs/fencing.md's table), each as the smallest run
// of real stores that took it: they failed on the store before the
// fixes. In each, a live instance c, holding a lease, reserved ranges a
// loss then took from the store, and another instance b reserves after
// the loss; b must never get a range below c's (c.high).
func Holes(t *testing.T, open func(t *testing.T) Store) {
	t.Run("F1 a forced fence is seen on the reservation fast path", func(t *testing.T) { holeFastPath(t, open) })
	t.Run("F2 one-table restore reserved first by an instance with no mark above it", func(t *testing.T) { holeOneTable(t, open) })
	t.Run("F3 a creation lost in a failover", func(t *testing.T) { holeLostCreation(t, open) })
	t.Run("F4 a one-shot process fences with the fleet's parameters", func(t *testing.T) { holeParams(t, open) })
	t.Run("F5 a graceful shutdown during the hold witnesses first", func(t *testing.T) { holeShutdown(t, open) })
	t.Run("F11 concurrent hand-backs of consecutive ranges", func(t *testing.T) { holeHandBacks(t, open) })
	t.Run("F12 a static worker ID waits for the hold", func(t *testing.T) { holeStatic(t, open) })
	t.Run("safe by construction: a library process is waited for with no Presence call", func(t *testing.T) { holeLibrary(t, open) })
}

// holeWorld is three instances on one store: a and b without a lease, c
// with one, and a tag with a small margin beside its step, so that the
// margin alone covers none of what c reserved.
type holeWorld struct {
	t       *testing.T
	a, b, c Store
	tag     string
	lease   snowflake.Lease
}

const holeStep, holeMargin = 1000, 10

func newHoleWorld(t *testing.T, open func(t *testing.T) Store) *holeWorld {
	t.Helper()
	cfg := fence.Config{Margin: holeMargin, LeaseTTL: FenceTTL}
	w := &holeWorld{t: t, tag: segmenttest.UniqueTag("hole")}
	for _, s := range []*Store{&w.a, &w.b, &w.c} {
		*s = open(t)
		if err := (*s).ConfigureFence(cfg, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A shared store may still hold reservations after an earlier
	// test's fence: that hold ends at fence_until.
	var until int64
	if err := w.a.DB().QueryRowContext(context.Background(), "SELECT fence_until FROM idgen_fence WHERE id = 1").Scan(&until); err != nil {
		t.Fatal(err)
	}
	if wait := time.Until(time.UnixMilli(until)); wait > 0 {
		time.Sleep(wait + 10*time.Millisecond) // the hold's own end, a time in the store
	}
	// Leases earlier tests left on a shared store would hold b back
	// whatever c does.
	w.exec("UPDATE worker_node SET owner = '', lease_expires_at = 0 WHERE owner <> ''")
	if err := w.a.CreateTag(context.Background(), segment.Tag{Name: w.tag, MaxID: 1, Step: holeStep}); err != nil {
		t.Fatal(err)
	}
	l, err := w.c.Leases().Claim(context.Background(), "hole-c-"+w.tag, time.Now(), FenceTTL, 1024)
	if err != nil {
		t.Fatal(err)
	}
	w.lease = l
	t.Cleanup(func() { _ = w.c.Leases().Release(context.Background(), w.lease, time.Now()) })
	return w
}

func (w *holeWorld) reserve(s Store, tag string) segment.Range {
	w.t.Helper()
	r, err := s.Reserve(context.Background(), tag, 0)
	if err != nil {
		w.t.Fatalf("reserve %s: %v", tag, err)
	}
	return r
}

// reserveMany has s reserve n ranges of tag and returns the end of the
// last.
func (w *holeWorld) reserveMany(s Store, tag string, n int) int64 {
	w.t.Helper()
	var end int64
	for range n {
		end = w.reserve(s, tag).End
	}
	return end
}

func (w *holeWorld) exec(q string) {
	w.t.Helper()
	if _, err := w.a.DB().ExecContext(context.Background(), q); err != nil {
		w.t.Fatalf("%s: %v", q, err)
	}
}

// setBack puts tag's row back to maxID, with its mark when withMark is
// set (a restore of both tables, as of the whole store).
func (w *holeWorld) setBack(tag string, maxID int64, withMark bool) {
	w.t.Helper()
	w.exec(fmt.Sprintf("UPDATE id_sequence SET max_id = %d WHERE biz_tag = '%s'", maxID, tag))
	if withMark {
		// The mark table is migration 00014's; before it there is none.
		_, _ = w.a.DB().ExecContext(context.Background(), fmt.Sprintf("UPDATE idgen_mark SET max_id = %d WHERE biz_tag = '%s'", maxID, tag))
	}
}

// newHistory makes the record name another history than the server's,
// as a failover to an asynchronous replica does the other way round;
// its generation moves on, so that processes which have seen the store
// read it (a new timeline is read on every reservation; the record is
// not).
func (w *holeWorld) newHistory() {
	w.exec("UPDATE idgen_fence SET system_id = 'another-history-" + w.tag + "', generation = generation + 1 WHERE id = 1")
	_, _ = w.a.DB().ExecContext(context.Background(), "UPDATE idgen_fence SET store_id = 'another-file-"+w.tag+"' WHERE id = 1")
}

// renewC is c's lease renewal: its check-in and witness raise.
func (w *holeWorld) renewC() {
	w.t.Helper()
	l, err := w.c.Leases().Renew(context.Background(), w.lease, time.Now(), time.Now(), FenceTTL)
	if err != nil {
		w.t.Fatalf("c's renewal: %v", err)
	}
	w.lease = l
}

// bAfter is b's reservation of tag after the loss: held until c checked
// in (checkIn, called once when b is first held) and every other live
// lease has (the presence leases the stores take themselves check in at
// their renewals, every third of FenceTTL), then above high. It must be
// let through by the check-ins, before the hold's own end. It reports
// whether b was held.
func (w *holeWorld) bAfter(tag string, high int64, checkIn func()) bool {
	w.t.Helper()
	held := false
	for {
		r, err := w.b.Reserve(context.Background(), tag, 0)
		if errors.Is(err, sqlstore.ErrHeld) {
			if !held {
				held = true
				checkIn()
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			w.t.Fatalf("b's reservation after the loss: %v", err)
		}
		if r.Start < high {
			w.t.Fatalf("b reserved %d-%d, inside the ranges another instance reserved up to %d and may still hand out", r.Start, r.End, high)
		}
		if held {
			var until int64
			if err := w.a.DB().QueryRowContext(context.Background(), "SELECT fence_until FROM idgen_fence WHERE id = 1").Scan(&until); err != nil {
				w.t.Fatal(err)
			}
			if time.Now().UnixMilli() >= until {
				w.t.Errorf("b was held until the hold's end (%s), not until the check-ins", time.UnixMilli(until).Format(time.RFC3339Nano))
			}
		}
		return held
	}
}

// F1: a fence that keeps the server's identity (forced by a's own
// regression) must hold b, which has seen the store and reserves on the
// one-statement path, until c checked in.
func holeFastPath(t *testing.T, open func(t *testing.T) Store) {
	w := newHoleWorld(t, open)
	bEnd := w.reserve(w.b, w.tag).End
	w.reserve(w.a, w.tag)
	high := w.reserveMany(w.c, w.tag, 5)
	// The row and its mark go back to before a's range: only a's own
	// memory shows it, and a's next reservation fences; b's memory is
	// not above the row a's fence leaves.
	w.setBack(w.tag, bEnd, true)
	if _, err := w.a.Reserve(context.Background(), w.tag, 0); err != nil && !errors.Is(err, sqlstore.ErrHeld) {
		t.Fatalf("a's reservation after the loss: %v", err)
	}
	if n := Fences(t, w.a.DB()); n == 0 {
		t.Fatal("a did not fence on its regression")
	}
	if !w.bAfter(w.tag, high, w.renewC) {
		t.Error("b was not held for c's check-in after a's fence")
	}
}

// F2: id_sequence alone goes back below c's ranges; b, whose own ranges
// are below the restored row, reserves first.
func holeOneTable(t *testing.T, open func(t *testing.T) Store) {
	w := newHoleWorld(t, open)
	w.reserve(w.a, w.tag)
	bEnd := w.reserve(w.b, w.tag).End
	high := w.reserveMany(w.c, w.tag, 5)
	w.setBack(w.tag, bEnd, false)
	w.bAfter(w.tag, high, w.renewC)
	if n := Fences(t, w.a.DB()); n == 0 {
		t.Error("the one-table restore was not fenced")
	}
}

// F3: c creates a tag during the lag and reserves from it; the failover
// loses the creation. After c's check-in, b creates it again.
func holeLostCreation(t *testing.T, open func(t *testing.T) Store) {
	w := newHoleWorld(t, open)
	ctx := context.Background()
	w.reserve(w.b, w.tag)
	lost := w.tag + "-lag"
	if err := w.c.CreateTag(ctx, segment.Tag{Name: lost, MaxID: 1, Step: holeStep}); err != nil {
		t.Fatal(err)
	}
	high := w.reserveMany(w.c, lost, 5)
	w.exec(fmt.Sprintf("DELETE FROM id_sequence WHERE biz_tag = '%s'", lost))
	_, _ = w.a.DB().ExecContext(ctx, fmt.Sprintf("DELETE FROM idgen_mark WHERE biz_tag = '%s'", lost))
	w.newHistory()
	// b finds the new history and fences; c checks in.
	w.bAfter(w.tag, 0, w.renewC)
	if err := w.b.CreateTag(ctx, segment.Tag{Name: lost, MaxID: 1, Step: holeStep}); err != nil && !errors.Is(err, segment.ErrTagExists) {
		t.Fatal(err)
	}
	w.bAfter(lost, high, func() { t.Fatal("b held after c's check-in") })
}

// F4: c is the fleet, started with a lease TTL of 10 minutes and a
// margin of its own, recorded in the store; b, a one-shot command with
// the defaults, fences after a failover with the fleet's values. A third
// process with other values is refused while c's lease is live.
func holeParams(t *testing.T, open func(t *testing.T) Store) {
	w := newHoleWorld(t, open)
	ctx := context.Background()
	const ttl, margin = 10 * time.Minute, 7777
	if err := w.c.ConfigureFence(fence.Config{LeaseTTL: ttl, Margin: margin}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.c.RecordFence(ctx); err != nil {
		t.Fatalf("the fleet's first instance records its parameters: %v", err)
	}
	// The hold of 10 minutes must not outlast this test on a shared
	// store, also when it fails: every lease checks in, and the record's
	// hold ends.
	t.Cleanup(func() {
		if _, err := w.c.Leases().Renew(ctx, w.lease, time.Now(), time.Now(), FenceTTL); err == nil {
			w.lease.ExpiresAt = time.Now().Add(FenceTTL)
		}
		w.exec("UPDATE idgen_fence SET fence_until = 0, fence_margin = 0, lease_ttl_ms = 0 WHERE id = 1")
	})
	other := open(t)
	if err := other.ConfigureFence(fence.Config{LeaseTTL: time.Minute}, nil); err != nil {
		t.Fatal(err)
	}
	if err := other.RecordFence(ctx); !errors.Is(err, store.ErrFenceParams) {
		t.Fatalf("an instance with another lease TTL beside a live fleet: %v, want ErrFenceParams", err)
	}
	cli := open(t) // the defaults, as a one-shot command's
	var ev atomic.Pointer[fence.Event]
	cli.ObserveFences(func(e fence.Event) { ev.Store(&e) })
	w.reserve(w.c, w.tag)
	w.newHistory()
	if err := cli.CreateTag(ctx, segment.Tag{Name: w.tag + "-cli", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Reserve(ctx, w.tag+"-cli", 0); err != nil && !errors.Is(err, sqlstore.ErrHeld) {
		t.Fatal(err)
	}
	e := ev.Load()
	switch {
	case e == nil:
		t.Fatal("the one-shot process did not fence")
	case e.Plan.HoldUntil-e.Plan.Now < ttl.Milliseconds():
		t.Fatalf("the one-shot process's fence holds for %v, want at least the fleet's lease TTL %v", time.Duration(e.Plan.HoldUntil-e.Plan.Now)*time.Millisecond, ttl)
	case e.Plan.Margin < margin:
		t.Fatalf("the one-shot process's fence moved rows up by %d, want at least the fleet's margin %d", e.Plan.Margin, margin)
	}
	w.renewC()
}

// F5: after a failover, c shuts down gracefully (releases its lease)
// while b is held for it.
func holeShutdown(t *testing.T, open func(t *testing.T) Store) {
	w := newHoleWorld(t, open)
	first := w.reserve(w.b, w.tag)
	high := w.reserveMany(w.c, w.tag, 5)
	w.setBack(w.tag, first.End, true)
	w.newHistory()
	w.bAfter(w.tag, high, func() {
		if err := w.c.Leases().Release(context.Background(), w.lease, time.Now()); err != nil {
			t.Fatalf("c's release: %v", err)
		}
	})
}

// F11: hand-backs of two consecutive ranges at once are no regression:
// a store that lost nothing is never fenced for them.
func holeHandBacks(t *testing.T, open func(t *testing.T) Store) {
	w := newHoleWorld(t, open)
	ctx := context.Background()
	before := Fences(t, w.a.DB())
	for i := range 20 {
		lo, hi := w.reserve(w.a, w.tag), w.reserve(w.a, w.tag)
		var wg sync.WaitGroup
		for _, r := range []segment.Range{hi, lo} {
			wg.Go(func() {
				if _, err := w.a.Release(ctx, w.tag, r.Start, r.End); err != nil {
					t.Errorf("round %d: hand back %d-%d: %v", i, r.Start, r.End, err)
				}
			})
		}
		wg.Wait()
		w.reserve(w.a, w.tag)
	}
	if n := Fences(t, w.a.DB()); n != before {
		t.Fatalf("%d fences for hand-backs of a store that lost nothing", n-before)
	}
}

// F12: a lapsed lease a fence counted stays its owner's while the hold
// lasts, also for a static --worker-id.
func holeStatic(t *testing.T, open func(t *testing.T) Store) {
	w := newHoleWorld(t, open)
	ctx := context.Background()
	lapsed := time.Now().Add(-3 * FenceTTL).UnixMilli()
	// Every lease lapsed, so that the fence counts back from the newest
	// expiry: a's presence, which its tag creation took, released too.
	before := w.a
	w.a = w.b
	if err := before.Close(); err != nil {
		t.Fatal(err)
	}
	w.exec(fmt.Sprintf("UPDATE worker_node SET owner = '' WHERE worker_id <> %d AND worker_id < %d", w.lease.WorkerID, sqlstore.PresenceFrom))
	w.exec(fmt.Sprintf("UPDATE worker_node SET lease_expires_at = %d WHERE worker_id = %d", lapsed, w.lease.WorkerID))
	w.newHistory()
	if _, err := w.b.Reserve(ctx, w.tag, 0); !errors.Is(err, sqlstore.ErrHeld) {
		t.Fatalf("b's reservation after the fence: %v, want it held for the lapsed lease", err)
	}
	if l, err := w.b.Leases().ClaimStatic(ctx, "static-"+w.tag, w.lease.WorkerID, time.Now(), FenceTTL); !errors.Is(err, snowflake.ErrNoFreeWorker) {
		_ = w.b.Leases().Unpin(ctx, w.lease.WorkerID)
		t.Fatalf("a static claim of the counted lease during the hold: %+v, %v; want ErrNoFreeWorker", l, err)
	}
	// c checks in, as its owner may, so that the hold ends for the
	// tests after this one.
	l, err := w.c.Leases().ClaimRange(ctx, w.lease.Owner, time.Now(), FenceTTL, w.lease.WorkerID, w.lease.WorkerID+1)
	if err != nil {
		t.Fatalf("c's claim of its own counted lease: %v", err)
	}
	w.lease = l
}

// Safe by construction: lib is a library program as the README writes
// it: Open, and segment.New over the store, with no Presence call, no
// lease and no fence configuration. A failover loses the range its
// allocator buffers. b must wait for lib's check-in, whose witness
// raise puts b's first range above that range: the store took a
// presence lease for lib at its first reservation, renewed on the fleet's
// lease TTL, which lib read from the store.
func holeLibrary(t *testing.T, open func(t *testing.T) Store) {
	w := newHoleWorld(t, open)
	ctx := context.Background()
	if err := w.c.RecordFence(ctx); err != nil { // the fleet's --lease-ttl: FenceTTL
		t.Fatal(err)
	}
	t.Cleanup(func() { w.exec("UPDATE idgen_fence SET fence_margin = 0, lease_ttl_ms = 0 WHERE id = 1") })
	first := w.reserve(w.b, w.tag)
	lib := open(t)
	alloc, err := segment.New(lib, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alloc.Close() })
	if _, err := alloc.Next(ctx, w.tag); err != nil {
		t.Fatal(err)
	}
	var high int64
	if err := w.a.DB().QueryRowContext(ctx, fmt.Sprintf("SELECT max_id FROM id_sequence WHERE biz_tag = '%s'", w.tag)).Scan(&high); err != nil {
		t.Fatal(err)
	}
	if high <= first.End {
		t.Fatalf("lib's allocator reserved nothing: max_id %d after b's range ended at %d", high, first.End)
	}
	w.setBack(w.tag, first.End, true)
	w.newHistory()
	if !w.bAfter(w.tag, high, w.renewC) {
		t.Error("b was not held after the failover")
	}
}
