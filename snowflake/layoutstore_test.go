package snowflake_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/snowflake"
)

func mustLayout(t testing.TB, epoch time.Time, bits ...int) snowflake.Layout {
	t.Helper()
	l, err := snowflake.NewLayout(epoch, bits[0], bits[1], bits[2])
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAdmitLayout(t *testing.T) {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	std := mustLayout(t, epoch, 41, 10, 12)
	wide := mustLayout(t, epoch, 41, 11, 11)
	later := mustLayout(t, epoch.Add(6684*time.Millisecond), 41, 10, 12)
	all := snowflake.WorkerRange{From: 0, To: 1024}
	low, high := snowflake.WorkerRange{From: 0, To: 512}, snowflake.WorkerRange{From: 512, To: 1024}
	retiredAt := epoch.Add(300 * 24 * time.Hour)
	rec := func(l snowflake.Layout, w snowflake.WorkerRange) snowflake.LayoutRecord {
		return snowflake.LayoutRecord{Layout: l, Workers: w}
	}
	retired := func(r snowflake.LayoutRecord) snowflake.LayoutRecord { r.Retired = retiredAt; return r }
	tests := []struct {
		name     string
		records  []snowflake.LayoutRecord
		layout   snowflake.Layout
		workers  snowflake.WorkerRange
		wantAt   int
		wantSpan snowflake.WorkerRange
		wantErr  error
	}{
		{"first claim records its layout", nil, std, all, 0, all, nil},
		{"same layout, span grows", []snowflake.LayoutRecord{rec(std, low)}, std, snowflake.WorkerRange{From: 700, To: 701}, 0, snowflake.WorkerRange{From: 0, To: 701}, nil},
		{"a record no claim has used is replaced", []snowflake.LayoutRecord{rec(std, snowflake.WorkerRange{})}, wide, snowflake.WorkerRange{From: 0, To: 2048}, 0, snowflake.WorkerRange{From: 0, To: 2048}, nil},
		{"a relayout's record is kept until used", []snowflake.LayoutRecord{retired(rec(std, low)), {Layout: wide, NotBefore: retiredAt}}, later, high, 2, high, nil},
		{"41/11/11 beside 41/10/12", []snowflake.LayoutRecord{rec(std, all)}, wide, snowflake.WorkerRange{From: 0, To: 2048}, 0, snowflake.WorkerRange{}, snowflake.ErrLayoutMismatch},
		{"epoch 6684 ms later on the same worker IDs", []snowflake.LayoutRecord{rec(std, all)}, later, all, 0, snowflake.WorkerRange{}, snowflake.ErrLayoutMismatch},
		{"epoch later on one worker ID the old layout used", []snowflake.LayoutRecord{rec(std, all)}, later, snowflake.WorkerRange{From: 1023, To: 1024}, 0, snowflake.WorkerRange{}, snowflake.ErrLayoutMismatch},
		{"epoch later on disjoint worker IDs", []snowflake.LayoutRecord{rec(std, low)}, later, high, 1, high, nil},
		{"41/11/11 on worker IDs whose bits 12-21 the old ones never take", []snowflake.LayoutRecord{rec(std, low)}, wide, snowflake.WorkerRange{From: 1024, To: 2048}, 1, snowflake.WorkerRange{From: 1024, To: 2048}, nil},
		{"41/11/11 on worker IDs 512-1023 share bits with 41/10/12's 256-511", []snowflake.LayoutRecord{rec(std, low)}, wide, high, 0, snowflake.WorkerRange{}, snowflake.ErrLayoutMismatch},
		{"growing the span into another layout's", []snowflake.LayoutRecord{rec(std, low), rec(later, high)}, std, all, 0, snowflake.WorkerRange{}, snowflake.ErrLayoutMismatch},
		{"a retired layout comes back on the same worker IDs", []snowflake.LayoutRecord{retired(rec(std, all))}, std, all, 0, snowflake.WorkerRange{}, snowflake.ErrLayoutMismatch},
		{"a retired layout comes back on other worker IDs", []snowflake.LayoutRecord{retired(rec(std, low))}, std, high, 1, high, nil},
		{"a layout above a retired one", []snowflake.LayoutRecord{retired(rec(std, all)),
			{Layout: wide, NotBefore: retiredAt.Add(time.Millisecond)}}, wide, snowflake.WorkerRange{From: 0, To: 2048}, 1, snowflake.WorkerRange{From: 0, To: 2048}, nil},
		{"a floor one millisecond short", []snowflake.LayoutRecord{retired(rec(std, all)),
			{Layout: wide, NotBefore: retiredAt.Add(-time.Millisecond)}}, wide, snowflake.WorkerRange{From: 0, To: 2048}, 0, snowflake.WorkerRange{}, snowflake.ErrLayoutMismatch},
		{"worker IDs outside the layout", nil, std, snowflake.WorkerRange{From: 0, To: 2048}, 0, snowflake.WorkerRange{}, snowflake.ErrInvalidWorkerID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, at, err := snowflake.AdmitLayout(tt.records, tt.layout, tt.workers)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("AdmitLayout = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if at != tt.wantAt || got.Workers != tt.wantSpan || got.Layout != tt.layout {
				t.Errorf("AdmitLayout = %+v at %d; want %s on %s at %d", got, at, tt.layout, tt.wantSpan, tt.wantAt)
			}
		})
	}
}

// The mismatch names both layouts, as the startup error shows them.
func TestAdmitLayout_MessageNamesBothLayouts(t *testing.T) {
	old := snowflake.LayoutRecord{Layout: snowflake.Layout{}, Workers: snowflake.WorkerRange{From: 0, To: 1024}}
	wide := mustLayout(t, time.Time{}, 41, 11, 11)
	_, _, err := snowflake.AdmitLayout([]snowflake.LayoutRecord{old}, wide, snowflake.WorkerRange{From: 0, To: 2048})
	want := "snowflake: layout mismatch: the worker IDs of this lease table have issued IDs in 41/10/12 epoch 2026-01-01T00:00:00Z on worker IDs 0-1023, " +
		"and this claim asks for 41/11/11 epoch 2026-01-01T00:00:00Z on worker IDs 0-2047: their IDs could be equal"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// Whatever AdmitLayout admits beside a record cannot issue an ID that the
// record's layout issues: an ID of layout a belongs to layout b's worker
// IDs wb exactly when b decodes it to a worker ID in wb. Checked on random
// pairs of different layouts, worker ranges and IDs; the refused pairs
// must include real collisions, so the check is not vacuous.
func TestAdmitLayout_AdmittedLayoutsNeverShareAnID(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 3))
	randLayout := func() snowflake.Layout {
		tb := 38 + rng.IntN(6)
		wb := 1 + rng.IntN(63-tb-1)
		epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(4)-2) * 1000 * time.Millisecond)
		return mustLayout(t, epoch, tb, wb, 63-tb-wb)
	}
	randRange := func(l snowflake.Layout) snowflake.WorkerRange {
		a, b := rng.Int64N(l.MaxWorkerID()+1), rng.Int64N(l.MaxWorkerID()+1)
		return snowflake.WorkerRange{From: min(a, b), To: max(a, b) + 1}
	}
	admitted, refusedWithCollision := 0, 0
	for range 3000 {
		a, b := randLayout(), randLayout()
		if a == b {
			continue // one layout: the leases keep its worker IDs apart
		}
		wa, wb := randRange(a), randRange(b)
		_, _, err := snowflake.AdmitLayout([]snowflake.LayoutRecord{{Layout: a, Workers: wa}}, b, wb)
		collided := false
		for range 200 {
			p := snowflake.Parts{
				Time:     a.Epoch().Add(time.Duration(rng.Int64N(3*365*24*3600*1000)) * time.Millisecond),
				WorkerID: wa.From + rng.Int64N(wa.To-wa.From),
				Sequence: rng.Int64N(a.MaxSequence() + 1),
			}
			id, err := a.Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			q, _ := b.Decode(id)
			if q.WorkerID >= wb.From && q.WorkerID < wb.To && !q.Time.Before(b.Epoch()) {
				collided = true
				break
			}
		}
		switch {
		case err == nil && collided:
			t.Fatalf("admitted %s on %s beside %s on %s, but they share IDs", b, wb, a, wa)
		case err == nil:
			admitted++
		case collided:
			refusedWithCollision++
		}
	}
	if admitted < 100 || refusedWithCollision < 100 {
		t.Fatalf("%d admitted, %d refused with a collision found: the sample does not exercise both sides", admitted, refusedWithCollision)
	}
	t.Logf("%d admitted pairs, 0 shared IDs; %d refused pairs with a shared ID found", admitted, refusedWithCollision)
}

func TestPlanRelayout(t *testing.T) {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	last := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := last.Add(time.Second)
	std := mustLayout(t, epoch, 41, 10, 12)
	tests := []struct {
		name     string
		to       snowflake.Layout
		maxWait  time.Duration
		wantWait time.Duration // NotBefore - last, when it is fixed by the layouts
		wantErr  error
	}{
		{"same layout: one millisecond on", std, time.Minute, 0, nil},
		{"epoch 6684 ms later waits 6684 ms", mustLayout(t, epoch.Add(6684*time.Millisecond), 41, 10, 12), time.Minute, 6684 * time.Millisecond, nil},
		{"epoch earlier: at once", mustLayout(t, epoch.Add(-24*time.Hour), 41, 10, 12), time.Minute, -24 * time.Hour, nil},
		{"41/11/11: same time bits, at once", mustLayout(t, epoch, 41, 11, 11), time.Minute, 0, nil},
		{"40/11/12: fewer time bits, at once", mustLayout(t, epoch, 40, 11, 12), time.Minute, -1, nil},
		{"42/9/12: one more time bit waits as long again as the epoch is past", mustLayout(t, epoch, 42, 9, 12), time.Minute, 0, snowflake.ErrInvalidConfig},
		{"epoch a day later, beyond the wait", mustLayout(t, epoch.Add(24*time.Hour), 41, 10, 12), time.Minute, 0, snowflake.ErrInvalidConfig},
	}
	old := snowflake.LayoutRecord{Layout: std, Workers: snowflake.WorkerRange{From: 0, To: 1024}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := snowflake.PlanRelayout([]snowflake.LayoutRecord{old}, last, tt.to, now, tt.maxWait)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("PlanRelayout = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if len(got) != 2 || !got[0].Retired.Equal(last) || got[1].Layout != tt.to || !got[1].Retired.IsZero() {
				t.Fatalf("PlanRelayout = %+v; want the old layout retired at %v and %s in use", got, last, tt.to)
			}
			nb := got[1].NotBefore
			if tt.wantWait >= 0 && !nb.Equal(last.Add(tt.wantWait)) {
				t.Errorf("NotBefore = %v, want %v", nb, last.Add(tt.wantWait))
			}
			// The new layout's first ID is above the old one's last, and
			// a floor a millisecond earlier would not be.
			maxOld, err := std.Encode(snowflake.Parts{Time: last, WorkerID: std.MaxWorkerID(), Sequence: std.MaxSequence()})
			if err != nil {
				t.Fatal(err)
			}
			first, err := tt.to.Encode(snowflake.Parts{Time: nb.Add(time.Millisecond)})
			if err != nil || first <= maxOld {
				t.Fatalf("first new ID %d (%v), last old ID %d: not above", first, err, maxOld)
			}
			if prev, err := tt.to.Encode(snowflake.Parts{Time: nb}); err == nil && prev > maxOld {
				t.Errorf("NotBefore %v is not the lowest floor: %d is above %d already", nb, prev, maxOld)
			}
			// What the new record admits: its own layout on any worker ID.
			if _, _, err := snowflake.AdmitLayout(got, tt.to, snowflake.WorkerRange{From: 0, To: tt.to.MaxWorkerID() + 1}); err != nil {
				t.Errorf("AdmitLayout after the relayout: %v", err)
			}
			if _, _, err := snowflake.AdmitLayout(got, std, snowflake.WorkerRange{From: 0, To: 1}); tt.to != std && !errors.Is(err, snowflake.ErrLayoutMismatch) {
				t.Errorf("AdmitLayout of the retired layout after the relayout = %v, want ErrLayoutMismatch", err)
			}
		})
	}
}

func TestPlanRelayout_SaysWhichEpochWorksNow(t *testing.T) {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	last := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	old := snowflake.LayoutRecord{Layout: mustLayout(t, epoch, 41, 10, 12), Workers: snowflake.WorkerRange{From: 0, To: 1024}}
	_, err := snowflake.PlanRelayout([]snowflake.LayoutRecord{old}, last, mustLayout(t, epoch, 42, 9, 12), last, time.Minute)
	// 42 time bits count half as fast in ID terms: the epoch must lie as
	// far before the old one as the old one lies before now.
	want := last.Add(-2 * last.Sub(epoch))
	if err == nil || !errors.Is(err, snowflake.ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
	e := want.Format(time.RFC3339Nano)
	if got := err.Error(); !containsAny(got, e, want.Add(time.Millisecond).Format(time.RFC3339Nano), want.Add(-time.Millisecond).Format(time.RFC3339Nano)) {
		t.Fatalf("err = %v; want it to suggest an epoch at or before about %s", err, e)
	}
	if _, err := snowflake.PlanRelayout(nil, last, old.Layout, last, time.Minute); err == nil {
		t.Fatal("PlanRelayout with nothing recorded succeeded")
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
