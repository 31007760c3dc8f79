package storetest

import (
	"context"
	"errors"
	"fmt"
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

// Witness checks the fence's promise to live instances whatever their
// step: a process holding a lease reserves 20 ranges of a tag whose row
// step is 10 times the fencer's range cap; a failover loses all of them
// and changes the server's identity. The fence's margin (set small here)
// covers fewer IDs than were lost, so another process's reservations must
// wait for the holder's check-in, whose witness raise moves the row above
// every range the holder reserved: the other's first range then starts
// there, and no ID of the lost ranges is reserved twice. The fence sizes
// its automatic margin from the store: at least the row step.
//
// Then a presence lease (store.Presence): above every snowflake worker
// ID, renewed, released by Close.
func Witness(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	const rangeCap, step, lost, margin = 100, 1000, 20, 500
	cfg := fence.Config{RangeCap: rangeCap, Margin: margin, LeaseTTL: FenceTTL}
	type proc struct {
		s  Store
		ev atomic.Pointer[fence.Event]
	}
	newProc := func() *proc {
		p := &proc{s: open(t)}
		if err := p.s.ConfigureFence(cfg, nil); err != nil {
			t.Fatal(err)
		}
		p.s.ObserveFences(func(e fence.Event) { p.ev.Store(&e) })
		return p
	}
	a := newProc()
	tag := segmenttest.UniqueTag("witness")
	if err := a.s.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: step}); err != nil {
		t.Fatal(err)
	}
	first, err := a.s.Reserve(ctx, tag, 0)
	if err != nil {
		t.Fatal(err)
	}
	var high int64
	for range lost {
		r, err := a.s.Reserve(ctx, tag, 0)
		if err != nil {
			t.Fatal(err)
		}
		high = r.End
	}
	owner := "witness-" + tag
	lease, err := a.s.Leases().Claim(ctx, owner, time.Now(), FenceTTL, 1024)
	if err != nil {
		t.Fatal(err)
	}
	// The failover: every reservation after the first is lost, and the
	// server is another history.
	exec := func(q string) {
		t.Helper()
		if _, err := a.s.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(fmt.Sprintf("UPDATE id_sequence SET max_id = %d WHERE biz_tag = '%s'", first.End, tag))
	exec("UPDATE idgen_fence SET system_id = 'another-history' WHERE id = 1")
	_, _ = a.s.DB().ExecContext(ctx, "UPDATE idgen_fence SET store_id = 'another-file' WHERE id = 1")

	b := newProc()
	var got segment.Range
	wasHeld := false
	for deadline := time.Now().Add(30 * time.Second); ; {
		got, err = b.s.Reserve(ctx, tag, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, sqlstore.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("the other process's reservation: %v", err)
		}
		if !wasHeld {
			// The holder checks in now: its renewal is its witness raise.
			if lease, err = a.s.Leases().Renew(ctx, lease, time.Now(), time.Now(), FenceTTL); err != nil {
				t.Fatalf("the holder's renewal after the fence: %v", err)
			}
		}
		wasHeld = true
		time.Sleep(20 * time.Millisecond)
	}
	ev := b.ev.Load()
	switch {
	case ev == nil:
		t.Fatal("the other process did not fence")
	case ev.Plan.RangeCap < step:
		t.Errorf("the fence knew a cap of %d, want at least the row step %d (the fencer's own cap is %d)", ev.Plan.RangeCap, step, rangeCap)
	case first.End+ev.Plan.Margin >= high:
		t.Fatalf("the margin %d covers the lost ranges (%d to %d): the test would not test the witness raise", ev.Plan.Margin, first.End, high)
	}
	if !wasHeld {
		t.Error("the other process's reservation was not held back for the holder's check-in")
	}
	if got.Start < high {
		t.Fatalf("after the fence the other process reserved %d-%d, inside the holder's lost ranges (up to %d): the witness raise did not happen", got.Start, got.End, high)
	}
	t.Logf("lost %d ranges of %d (%d to %d); margin %d; the other process was held until the holder's check-in, then reserved from %d",
		lost, step, first.End, high, ev.Plan.Margin, got.Start)

	p, err := a.s.Presence(ctx, store.PresenceConfig{Owner: "presence-" + tag, TTL: FenceTTL})
	if err != nil {
		t.Fatal(err)
	}
	id := p.WorkerID()
	if id < sqlstore.PresenceFrom {
		t.Fatalf("presence lease on worker %d: it must stay above every snowflake worker ID (%d)", id, sqlstore.PresenceFrom)
	}
	row := func() (owner string, expires int64) {
		t.Helper()
		if err := a.s.DB().QueryRowContext(ctx, fmt.Sprintf("SELECT owner, lease_expires_at FROM worker_node WHERE worker_id = %d", id)).Scan(&owner, &expires); err != nil {
			t.Fatal(err)
		}
		return owner, expires
	}
	_, e0 := row()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if o, e := row(); o == "presence-"+tag && e > e0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the presence lease was not renewed within 10 s (TTL 2 s)")
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if o, _ := row(); o != "" {
		t.Fatalf("after Close the presence row is still owned by %q", o)
	}

	// A renewal that finds its lease gone before the expiry it was told
	// is a store that went back: it fences once, and the lease is lost.
	// One taken over after that expiry (a late renewal) is not.
	c := newProc()
	fenced := func() int64 { return Fences(t, c.s.DB()) }
	now := time.Now()
	l, err := c.s.Leases().ClaimRange(ctx, "went-back-"+tag, now, time.Minute, 900, 901)
	if err != nil {
		t.Fatal(err)
	}
	before := fenced()
	if _, err := c.s.DB().ExecContext(ctx, "DELETE FROM worker_node WHERE worker_id = 900"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.s.Leases().Renew(ctx, l, now.Add(time.Second), now, time.Minute); !errors.Is(err, snowflake.ErrLeaseLost) {
		t.Fatalf("renewal of a lease whose row is gone: %v, want ErrLeaseLost", err)
	}
	if n := fenced(); n != before+1 {
		t.Fatalf("a lease gone before its expiry: %d fences, want 1", n-before)
	}
	l, err = c.s.Leases().ClaimRange(ctx, "late-"+tag, now, time.Minute, 901, 902)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.s.Leases().ClaimRange(ctx, "next-"+tag, l.ExpiresAt.Add(time.Millisecond), time.Minute, 901, 902); err != nil {
		t.Fatal(err)
	}
	before = fenced()
	if _, err := c.s.Leases().Renew(ctx, l, now.Add(time.Second), now, time.Minute); !errors.Is(err, snowflake.ErrLeaseLost) {
		t.Fatalf("late renewal of a lease taken over after its expiry: %v, want ErrLeaseLost", err)
	}
	if n := fenced(); n != before {
		t.Fatalf("a lease taken over after its expiry fenced %d times, want none", n-before)
	}
}
