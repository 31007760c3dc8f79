package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/fence"
)

// FenceFloor checks the store's side of the tag floor and of covers
// (fence.Record.Floor, Record.Covers, migration 00010) on one process,
// with fences planted as in Fencing (another history in the record):
//
//   - a fence adds its margin to the recorded floor and records the
//     generation it knew of as covered;
//   - a tag created after it, by CreateTag or Import, starts the floor
//     above the start it asks for, and BumpAll raises the floor with
//     every tag;
//   - a fence after a loss that took fences with it (the recorded floor
//     below the one the process saw) adds the difference to its margin;
//   - a record newer than the one the process saw, but covering less
//     than it, makes the process fence; one that covers it does not.
//
// The store may have been fenced before (the floor is read, not
// assumed).
func FenceFloor(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	p := &fenceProc{s: open(t)}
	if err := p.s.ConfigureFence(fence.Config{Margin: FenceMargin, LeaseTTL: FenceTTL}, nil); err != nil {
		t.Fatal(err)
	}
	p.s.ObserveFences(func(ev fence.Event) { p.fences.Add(1); p.last.Store(&ev) })
	exec := func(q string) {
		t.Helper()
		if _, err := p.s.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	record := func() fence.Record {
		t.Helper()
		_, rec, err := p.s.Identity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	maxID := func(tag string) int64 {
		t.Helper()
		var n int64
		if err := p.s.DB().QueryRowContext(ctx, fmt.Sprintf("SELECT max_id FROM id_sequence WHERE biz_tag = '%s'", tag)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// check runs the start-up check, which fences if the record says so,
	// and returns the fence it performed, if any.
	check := func() *fence.Event {
		t.Helper()
		before := p.fences.Load()
		if err := p.s.CheckIdentity(ctx); err != nil {
			t.Fatal(err)
		}
		if p.fences.Load() == before {
			return nil
		}
		return p.last.Load()
	}
	// failover plants another history in the record, with the given
	// floor (-1 keeps it).
	n := 0
	failover := func(floor int64) {
		t.Helper()
		n++
		q := fmt.Sprintf("UPDATE idgen_fence SET system_id = 'floor-history-%d'", n)
		if floor >= 0 {
			q += fmt.Sprintf(", tag_floor = %d", floor)
		}
		exec(q + " WHERE id = 1")
	}

	tag := segmenttest.UniqueTag("floor")
	if err := p.s.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.s.Reserve(ctx, tag, 0); err != nil {
		t.Fatal(err)
	}
	if ev := check(); ev != nil {
		t.Fatalf("the check after a reservation fenced: %+v", ev)
	}
	rec0 := record()

	t.Run("FenceRaisesFloor", func(t *testing.T) {
		failover(-1)
		ev := check()
		if ev == nil {
			t.Fatal("no fence after the record named another history")
		}
		rec := record()
		if ev.Plan.Lost != 0 || ev.Plan.Margin != FenceApplied {
			t.Fatalf("fence margin %d (lost %d), want %d and 0", ev.Plan.Margin, ev.Plan.Lost, FenceApplied)
		}
		if rec.Floor != rec0.Floor+FenceApplied || ev.To.Floor != rec.Floor {
			t.Fatalf("tag floor %d after the fence (event: %d), want %d + the margin %d", rec.Floor, ev.To.Floor, rec0.Floor, FenceApplied)
		}
		if rec.Covers != rec0.Generation {
			t.Fatalf("the fence's record covers %d, want %d, the generation the process saw", rec.Covers, rec0.Generation)
		}
	})

	t.Run("CreatedAfterFenceStartsAtFloor", func(t *testing.T) {
		floor := record().Floor
		if floor < FenceMargin {
			t.Fatalf("tag floor %d, want at least the margin %d", floor, FenceMargin)
		}
		created, imported := segmenttest.UniqueTag("floor-new"), segmenttest.UniqueTag("floor-import")
		if err := p.s.CreateTag(ctx, segment.Tag{Name: created, MaxID: 5, Step: 10}); err != nil {
			t.Fatal(err)
		}
		before, err := p.s.Import(ctx, []segment.Tag{{Name: imported, MaxID: 7, Step: 10}, {Name: tag, MaxID: 1, Step: 10}})
		if err != nil {
			t.Fatal(err)
		}
		if before[0] != -1 {
			t.Fatalf("import of a new tag: before %d, want -1 (created)", before[0])
		}
		for name, start := range map[string]int64{created: 5, imported: 7} {
			if got := maxID(name); got != start+floor {
				t.Errorf("tag %s created with start %d after a fence: max_id %d, want %d (the floor %d above it)", name, start, got, start+floor, floor)
			}
		}
		r, err := p.s.Reserve(ctx, created, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.Start != 5+floor {
			t.Fatalf("first range of a tag created after a fence starts at %d, want %d", r.Start, 5+floor)
		}
	})

	t.Run("BumpAllRaisesFloor", func(t *testing.T) {
		const by = 777
		edge := segmenttest.UniqueTag("floor-edge")
		if err := p.s.CreateTag(ctx, segment.Tag{Name: edge, MaxID: 1, Step: 10}); err != nil {
			t.Fatal(err)
		}
		exec(fmt.Sprintf("UPDATE id_sequence SET max_id = %d WHERE biz_tag = '%s'", int64(math.MaxInt64-by+1), edge))
		floor, was := record().Floor, maxID(tag)
		// A worker row the restore kept may belong to a holder paused
		// through it, whose lease the store no longer shows: after the
		// bump, no worker stamps before that lease could have lapsed.
		paused, err := p.s.Leases().Claim(ctx, "bump-paused", time.Now(), FenceTTL, 1024)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.s.Leases().Release(ctx, paused, time.Time{}) }()
		// So may a lock's grant: every token moves up with the tags.
		held, err := p.s.Locks().Acquire(ctx, segmenttest.UniqueTag("bump-lock"), "bump-paused", FenceTTL, false)
		if err != nil {
			t.Fatal(err)
		}
		bumped := time.Now()
		tags, err := p.s.BumpAll(ctx, by)
		if err != nil {
			t.Fatal(err)
		}
		workers, err := p.s.Leases().Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lapsed := bumped.Add(FenceTTL + FenceTTL/10).Truncate(time.Millisecond)
		for _, w := range workers {
			if w.LastTimestamp.Before(lapsed) {
				t.Errorf("worker %d stamps from %v after bump --all, before %v (TTL + TTL/10 after it)", w.WorkerID, w.LastTimestamp, lapsed)
			}
		}
		if len(workers) == 0 {
			t.Fatal("no worker row to check")
		}
		if _, err := p.s.Locks().Renew(ctx, held, FenceTTL); !errors.Is(err, lock.ErrLost) {
			t.Fatalf("renewing a grant that bump --all moved: %v, want lock.ErrLost", err)
		}
		var token int64
		if err := p.s.DB().QueryRowContext(ctx, fmt.Sprintf("SELECT token FROM idgen_lock WHERE name = '%s'", held.Name)).Scan(&token); err != nil {
			t.Fatal(err)
		}
		if token != held.Token+by {
			t.Fatalf("lock token %d after bump --all --by %d, want %d", token, by, held.Token+by)
		}
		if got := maxID(edge); got != math.MaxInt64 {
			t.Fatalf("a tag within %d of the int64 limit: max_id %d after bump --all, want the limit (exhausted)", by, got)
		}
		if got := record().Floor; got != floor+by {
			t.Fatalf("tag floor %d after bump --all --by %d, want %d", got, by, floor+by)
		}
		if got := maxID(tag); got != was+by {
			t.Fatalf("max_id %d after bump --all --by %d, want %d", got, by, was+by)
		}
		i := slices.IndexFunc(tags, func(x segment.Tag) bool { return x.Name == tag })
		if i < 0 || tags[i].MaxID != was+by {
			t.Fatalf("BumpAll returned %+v for %s, want max_id %d", tags, tag, was+by)
		}
		late := segmenttest.UniqueTag("floor-late")
		if err := p.s.CreateTag(ctx, segment.Tag{Name: late, MaxID: 1, Step: 10}); err != nil {
			t.Fatal(err)
		}
		if got := maxID(late); got != 1+floor+by {
			t.Fatalf("a tag created after bump --all: max_id %d, want %d", got, 1+floor+by)
		}
		if ev := check(); ev != nil {
			t.Fatalf("the check after bump --all fenced: %s", ev.Reason)
		}
	})

	t.Run("LostFencesAddToMargin", func(t *testing.T) {
		// A second failover that lost the last fence: the record comes
		// back with a floor below the one the process saw. More than
		// FenceMargin, so that the margin plus what was lost exceeds the
		// margin per failover counted twice.
		const lost = 1_300_000
		seen, was := record().Floor, maxID(tag)
		failover(seen - lost)
		ev := check()
		if ev == nil {
			t.Fatal("no fence after the record named another history")
		}
		if ev.Plan.Lost != lost || ev.Plan.Margin != FenceMargin+lost {
			t.Fatalf("fence after a loss of %d of floor: margin %d (lost %d), want %d (%d)", lost, ev.Plan.Margin, ev.Plan.Lost, FenceMargin+lost, lost)
		}
		if got := maxID(tag); got != was+FenceMargin+lost {
			t.Fatalf("max_id %d after the fence, want %d + %d + %d", got, was, FenceMargin, lost)
		}
		if got := record().Floor; got != seen+FenceMargin {
			t.Fatalf("tag floor %d after the fence, want %d: the one the process saw plus the margin", got, seen+FenceMargin)
		}
	})

	t.Run("RecordCoveringLessFences", func(t *testing.T) {
		seen := record().Generation
		// A record newer than the one the process saw, written by a
		// fence that did not know of it: the process's fence was lost.
		exec(fmt.Sprintf("UPDATE idgen_fence SET generation = %d, covers = %d WHERE id = 1", seen+1000, seen-1))
		ev := check()
		if ev == nil {
			t.Fatal("no fence after a newer record covering less than the generation the process saw")
		}
		if !strings.Contains(ev.Reason, "was lost") || ev.Plan.Margin != FenceApplied {
			t.Fatalf("fence %q with margin %d, want a lost fence and the margin %d", ev.Reason, ev.Plan.Margin, FenceApplied)
		}
		if rec := record(); rec.Covers != seen+1000 || rec.Generation <= seen+1000 {
			t.Fatalf("record after the fence: generation %d covering %d, want above and covering %d", rec.Generation, rec.Covers, seen+1000)
		}
		// A newer record that covers what the process saw: another
		// process fenced knowing of it; go on.
		seen = record().Generation
		exec(fmt.Sprintf("UPDATE idgen_fence SET generation = %d, covers = %d WHERE id = 1", seen+1000, seen))
		if ev := check(); ev != nil {
			t.Fatalf("a newer record covering the generation the process saw made it fence: %s", ev.Reason)
		}
	})
}
