package snowflaketest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/snowflake"
)

// RunLayoutStore is the conformance suite of snowflake.LayoutClaimer and
// of Layouts and Relayout, run by every LeaseTable backend: claims in
// another layout or epoch are refused, on every claim path and when two
// processes start together, claims on worker IDs whose IDs cannot meet
// are admitted, and a relayout lets the new layout in with no ID twice.
//
// newTable returns an opener of handles on a lease table that has never
// been used, with the schema in place; every call of the opener is
// another handle on that table, as another process would have.
func RunLayoutStore(t *testing.T, newTable func(t *testing.T) func(t *testing.T) snowflake.LeaseTable) {
	ctx := context.Background()
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	layout := func(epoch time.Time, bits ...int) snowflake.Layout {
		l, err := snowflake.NewLayout(epoch, bits[0], bits[1], bits[2])
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	std := layout(epoch, 41, 10, 12)
	wide := layout(epoch, 41, 11, 11)
	later := layout(epoch.Add(6684*time.Millisecond), 41, 10, 12)
	start := time.Now().UTC().Truncate(time.Millisecond)
	newLeased := func(t *testing.T, s snowflake.LeaseStore, c *Clock, l snowflake.Layout, wr snowflake.WorkerRange, static int64) (*snowflake.Leased, error) {
		cfg := snowflake.LeasedConfig{Generator: l.Config(), WorkerRange: wr, TTL: suiteTTL, RenewInterval: -1}
		cfg.Generator.Clock = c
		cfg.Owner = fmt.Sprintf("layout-%s-%d-%d", l, wr.From, static)
		if static >= 0 {
			cfg.Static, cfg.Generator.WorkerID = true, static
		}
		g, err := snowflake.NewLeased(ctx, s, cfg)
		if err == nil {
			t.Cleanup(func() { _ = g.Shutdown(ctx) })
		}
		return g, err
	}
	issue := func(t *testing.T, g *snowflake.Leased, n int) []int64 {
		t.Helper()
		ids, err := g.NextN(ctx, "layout", n)
		if err != nil {
			t.Fatalf("NextN: %v", err)
		}
		return ids
	}

	// Two claimers, one after the other, the first still holding its
	// lease: the second's IDs either could equal the first's (refused)
	// or cannot (admitted, and then none does).
	type claimer struct {
		layout  snowflake.Layout
		workers snowflake.WorkerRange // zero: every worker ID
		static  int64                 // -1: leased
	}
	all := snowflake.WorkerRange{}
	low, high := snowflake.WorkerRange{From: 0, To: 512}, snowflake.WorkerRange{From: 512, To: 1024}
	tests := []struct {
		name          string
		first, second claimer
		wantErr       error
	}{
		{"41/11/11 beside 41/10/12", claimer{std, all, -1}, claimer{wide, all, -1}, snowflake.ErrLayoutMismatch},
		{"epoch 6684 ms later", claimer{std, all, -1}, claimer{later, all, -1}, snowflake.ErrLayoutMismatch},
		{"static worker ID in another epoch", claimer{std, all, -1}, claimer{later, all, 700}, snowflake.ErrLayoutMismatch},
		{"another epoch on an overlapping range", claimer{std, low, -1}, claimer{later, snowflake.WorkerRange{From: 256, To: 768}, -1}, snowflake.ErrLayoutMismatch},
		{"a static first, then another layout", claimer{std, all, 3}, claimer{wide, all, -1}, snowflake.ErrLayoutMismatch},
		{"the same layout on a static worker ID", claimer{std, all, -1}, claimer{std, all, 9}, nil},
		{"another epoch on a disjoint range", claimer{std, low, -1}, claimer{later, high, -1}, nil},
		{"41/11/11 on worker IDs whose bits 41/10/12's never take", claimer{std, low, -1}, claimer{wide, snowflake.WorkerRange{From: 1024, To: 2048}, -1}, nil},
	}
	for _, tt := range tests {
		t.Run("Claim/"+tt.name, func(t *testing.T) {
			open := newTable(t)
			c := NewClock(start)
			a, err := newLeased(t, open(t), c, tt.first.layout, tt.first.workers, tt.first.static)
			if err != nil {
				t.Fatalf("first claim in %s: %v", tt.first.layout, err)
			}
			b, err := newLeased(t, open(t), c, tt.second.layout, tt.second.workers, tt.second.static)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("second claim in %s on %s = %v, want %v", tt.second.layout, tt.second.workers, err, tt.wantErr)
			}
			if err != nil {
				for _, l := range []snowflake.Layout{tt.first.layout, tt.second.layout} {
					if !strings.Contains(err.Error(), l.String()) {
						t.Errorf("the error does not name %s: %v", l, err)
					}
				}
				if ws, err := open(t).Workers(ctx); err != nil || len(leased(ws, start)) != 1 {
					t.Errorf("after the refusal %d leases are live (%v), want the first one's alone", len(leased(ws, start)), err)
				}
				return
			}
			ids := append(issue(t, a, 20000), issue(t, b, 20000)...)
			if d := segmenttest.Duplicates(ids); d != 0 {
				t.Fatalf("%d duplicates among %d IDs of %s and %s", d, len(ids), tt.first.layout, tt.second.layout)
			}
		})
	}

	// Handles that claim at once, half of them in one layout and half in
	// another: the layout recorded first wins, the other is refused
	// everywhere.
	t.Run("Claim/ConcurrentFirstClaims", func(t *testing.T) {
		open := newTable(t)
		const claimers = 8
		stores := make([]snowflake.LeaseTable, claimers)
		for i := range stores {
			stores[i] = open(t)
		}
		errs := make([]error, claimers)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i, s := range stores {
			l := []snowflake.Layout{std, wide}[i%2]
			wg.Go(func() {
				<-gate
				_, errs[i] = s.ClaimLayout(ctx, fmt.Sprintf("race-%d", i), start, suiteTTL, l, snowflake.WorkerRange{From: 0, To: l.MaxWorkerID() + 1}, -1)
			})
		}
		close(gate)
		wg.Wait()
		won := map[int]bool{}
		for i, err := range errs {
			switch {
			case err == nil:
				won[i%2] = true
			case !errors.Is(err, snowflake.ErrLayoutMismatch):
				t.Errorf("claim %d: %v", i, err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("claims in both layouts succeeded, or none did (%v): %v", won, errs)
		}
		for i, err := range errs {
			if won[i%2] != (err == nil) {
				t.Errorf("claim %d in the %s layout: %v", i, []string{"winning", "losing"}[i%2], err)
			}
		}
		recs, err := open(t).Layouts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(inUse(recs)); n != 1 {
			t.Errorf("%d layouts in use after the race: %v", n, recs)
		}
	})

	t.Run("Relayout/RefusedWhileALeaseIsLive", func(t *testing.T) {
		open := newTable(t)
		c := NewClock(start)
		if _, err := newLeased(t, open(t), c, std, all, -1); err != nil {
			t.Fatal(err)
		}
		if _, err := open(t).Relayout(ctx, later, start.Add(time.Second), time.Minute); !errors.Is(err, snowflake.ErrLayoutInUse) {
			t.Fatalf("Relayout with a live lease = %v, want ErrLayoutInUse", err)
		}
		if _, err := newLeased(t, open(t), c, later, all, -1); !errors.Is(err, snowflake.ErrLayoutMismatch) {
			t.Fatalf("claim in the new layout after the refused relayout = %v, want ErrLayoutMismatch", err)
		}
	})

	t.Run("Relayout/NothingRecorded", func(t *testing.T) {
		if _, err := newTable(t)(t).Relayout(ctx, later, start, time.Minute); err == nil {
			t.Fatal("Relayout of a table with no layout recorded succeeded")
		}
	})

	// The old layout issues IDs up to its last millisecond, stops, and the
	// table moves to the new one: its IDs all lie above the old ones, and
	// the old layout is refused from then on.
	relayouts := []struct {
		name string
		to   snowflake.Layout
	}{
		{"EpochLater", later},
		{"EpochEarlier", layout(epoch.Add(-time.Hour), 41, 10, 12)},
		{"Widths", wide},
	}
	for _, tt := range relayouts {
		t.Run("Relayout/"+tt.name, func(t *testing.T) {
			open := newTable(t)
			c := NewClock(start)
			a, err := newLeased(t, open(t), c, std, all, -1)
			if err != nil {
				t.Fatal(err)
			}
			old := issue(t, a, 50000) // more than 4096: several milliseconds
			if err := a.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			rec, err := open(t).Relayout(ctx, tt.to, c.Wall(), time.Minute)
			if err != nil {
				t.Fatalf("Relayout to %s: %v", tt.to, err)
			}
			if rec.Layout != tt.to || !rec.Retired.IsZero() {
				t.Fatalf("Relayout = %+v, want %s in use", rec, tt.to)
			}
			if _, err := newLeased(t, open(t), c, std, all, -1); !errors.Is(err, snowflake.ErrLayoutMismatch) {
				t.Fatalf("claim in the retired layout = %v, want ErrLayoutMismatch", err)
			}
			if wait := rec.NotBefore.Sub(c.Wall()); wait > 0 {
				c.Advance(wait + time.Millisecond)
			}
			b, err := newLeased(t, open(t), c, tt.to, all, -1)
			if err != nil {
				t.Fatalf("claim in the new layout: %v", err)
			}
			if b.WorkerID() != 0 {
				t.Errorf("the new layout got worker %d, want the released 0", b.WorkerID())
			}
			fresh := issue(t, b, 50000)
			if fresh[0] <= slices.Max(old) {
				t.Errorf("first ID of %s is %d, not above the last of %s, %d", tt.to, fresh[0], std, slices.Max(old))
			}
			if d := segmenttest.Duplicates(append(old, fresh...)); d != 0 {
				t.Fatalf("%d duplicates across the relayout", d)
			}
			recs, err := open(t).Layouts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if u := inUse(recs); len(u) != 1 || u[0].Layout != tt.to {
				t.Errorf("layouts in use after the relayout: %v", u)
			}
		})
	}

	// A holder whose lease expired, but who has not heard, must not renew
	// it in the old layout after the relayout.
	t.Run("Relayout/AnExpiredHolderCannotRenew", func(t *testing.T) {
		open := newTable(t)
		ca := NewClock(start)
		a, err := newLeased(t, open(t), ca, std, all, -1)
		if err != nil {
			t.Fatal(err)
		}
		issue(t, a, 10)
		// By the relayout's clock a's lease has expired; by a's own, it is
		// still live.
		if _, err := open(t).Relayout(ctx, later, a.LeaseExpiry().Add(time.Millisecond), time.Minute); err != nil {
			t.Fatalf("Relayout after the lease expired: %v", err)
		}
		ca.Advance(suiteTTL / 2)
		err = a.Heartbeat(ctx)
		if !errors.Is(err, snowflake.ErrLayoutMismatch) {
			t.Fatalf("old holder's Heartbeat after the relayout = %v, want ErrLayoutMismatch from its claim", err)
		}
		if _, err := a.Next(ctx, "layout"); !errors.Is(err, snowflake.ErrNoWorkerLease) {
			t.Fatalf("old holder's Next after the relayout = %v, want ErrNoWorkerLease", err)
		}
	})
}

// leased returns the workers whose lease is live at now.
func leased(ws []snowflake.Lease, now time.Time) []snowflake.Lease {
	var out []snowflake.Lease
	for _, w := range ws {
		if w.Owner != "" && w.ExpiresAt.After(now) {
			out = append(out, w)
		}
	}
	return out
}

func inUse(recs []snowflake.LayoutRecord) []snowflake.LayoutRecord {
	var out []snowflake.LayoutRecord
	for _, r := range recs {
		if r.Retired.IsZero() {
			out = append(out, r)
		}
	}
	return out
}
