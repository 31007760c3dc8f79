package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// Witness checks the fence's promise to live instances whatever their
// step: a process holding a presence lease (serve --snowflake=false)
// reserves 20 ranges of a tag whose row step is 10 times the fencer's
// range cap; a failover loses all of them and changes the server's
// identity. The margin the fencer computes from the store (the row step)
// covers fewer IDs than were lost, so the fencer's reservations must wait
// for the holder's check-in, whose witness raise moves the row above
// every range the holder reserved: the fencer's first range then starts
// there, and no ID of the lost ranges is reserved twice.
//
// Then the checks that need no failover: a store with rows but no record
// is fenced, and a first recording covers generation 1.
func Witness(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	const rangeCap, step, lost = 100, 1000, 20
	cfg := fence.Config{RangeCap: rangeCap, LeaseTTL: FenceTTL}
	proc := func() (Store, *fence.Event) {
		s := open(t)
		if err := s.ConfigureFence(cfg, nil); err != nil {
			t.Fatal(err)
		}
		return s, nil
	}
	a, _ := proc()
	p, err := a.Presence(ctx, store.PresenceConfig{TTL: FenceTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(ctx) }()
	if p.WorkerID() < sqlstore.PresenceFrom {
		t.Fatalf("presence lease on worker %d: it must stay above every snowflake worker ID (%d)", p.WorkerID(), sqlstore.PresenceFrom)
	}
	tag := segmenttest.UniqueTag("witness")
	if err := a.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: step}); err != nil {
		t.Fatal(err)
	}
	first, err := a.Reserve(ctx, tag, 0)
	if err != nil {
		t.Fatal(err)
	}
	var high int64
	for range lost {
		r, err := a.Reserve(ctx, tag, 0)
		if err != nil {
			t.Fatal(err)
		}
		high = r.End
	}
	// The failover: every reservation after the first is lost, and the
	// server is another history.
	exec := func(q string) {
		t.Helper()
		if _, err := a.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(fmt.Sprintf("UPDATE id_sequence SET max_id = %d WHERE biz_tag = '%s'", first.End, tag))
	exec("UPDATE idgen_fence SET system_id = 'another-history' WHERE id = 1")
	_, _ = a.DB().ExecContext(ctx, "UPDATE idgen_fence SET store_id = 'another-file' WHERE id = 1")

	b, _ := proc()
	var ev *fence.Event
	b.ObserveFences(func(e fence.Event) { ev = &e })
	var got segment.Range
	wasHeld := false
	for deadline := time.Now().Add(30 * time.Second); ; {
		got, err = b.Reserve(ctx, tag, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, sqlstore.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("the fencer's reservation: %v", err)
		}
		wasHeld = true
		time.Sleep(20 * time.Millisecond)
	}
	if ev == nil {
		t.Fatal("the fencer did not fence")
	}
	if ev.Plan.RangeCap != step {
		t.Errorf("the fence sized its margin from a cap of %d, want the row step %d (the fencer's own cap is %d)", ev.Plan.RangeCap, step, rangeCap)
	}
	if first.End+ev.Plan.Margin >= high {
		t.Fatalf("the margin %d covers the lost ranges (%d to %d): the test would not test the witness raise", ev.Plan.Margin, first.End, high)
	}
	if !wasHeld {
		t.Error("the fencer's reservation was not held back for the presence lease's check-in")
	}
	if got.Start < high {
		t.Fatalf("after the fence the fencer reserved %d-%d, inside the holder's lost ranges (up to %d): the witness raise did not happen", got.Start, got.End, high)
	}
	t.Logf("lost %d ranges of %d (%d to %d); margin %d from cap %d; the fencer was held until the holder's check-in, then reserved from %d",
		lost, step, first.End, high, ev.Plan.Margin, ev.Plan.RangeCap, got.Start)
}
