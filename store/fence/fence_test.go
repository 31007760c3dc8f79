package fence_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/idgen/idgen/store/fence"
)

func pg(system, timeline, pos string) fence.Identity {
	return fence.Identity{Kind: fence.Postgres, System: system, Timeline: timeline, Position: pos}
}

func TestDecide(t *testing.T) {
	cur := pg("7714", "00000002", "0/3000000")
	rec := fence.Record{Identity: pg("7714", "00000002", "0/1000000"), Generation: 100}
	seen := fence.Memory{}.Observe(pg("7714", "00000002", "0/2000000"), rec)
	galera := func(node, pos string) fence.Identity {
		return fence.Identity{Kind: fence.Galera, System: "c1", Position: pos, Node: node}
	}
	grec := fence.Record{Identity: galera("", ""), Generation: 7}
	gmem := fence.Memory{}.Observe(galera("n1:3306", "900"), grec)
	for _, tc := range []struct {
		name string
		mem  fence.Memory
		cur  fence.Identity
		rec  fence.Record
		want fence.Verdict
	}{
		{"new store, new process", fence.Memory{}, cur, fence.Record{}, fence.Initialize},
		{"record lost under a running process", seen, cur, fence.Record{}, fence.Fence},
		{"same history, fresh process", fence.Memory{}, cur, rec, fence.Proceed},
		{"same history, position ahead", seen, cur, rec, fence.Proceed},
		{"promotion: new timeline, fresh process", fence.Memory{}, pg("7714", "00000003", "0/3000000"), rec, fence.Fence},
		{"promotion: new timeline, running process", seen, pg("7714", "00000003", "0/3000000"), rec, fence.Fence},
		{"another cluster", fence.Memory{}, pg("9999", "00000002", "0/3000000"), rec, fence.Fence},
		{"restore: position back, running process", seen, pg("7714", "00000002", "0/1800000"), rec, fence.Fence},
		{"restore: position back, fresh process cannot know", fence.Memory{}, pg("7714", "00000002", "0/1800000"), rec, fence.Proceed},
		{"another process fenced since", seen, pg("7714", "00000003", "0/100"), fence.Record{Identity: pg("7714", "00000003", ""), Generation: 200}, fence.Proceed},
		{"another process fenced a restore since", seen, pg("7714", "00000002", "0/1800000"), fence.Record{Identity: rec.Identity, Generation: 200}, fence.Proceed},
		{"the record went back", seen, cur, fence.Record{Identity: rec.Identity, Generation: 50}, fence.Fence},
		{"unreadable position is no evidence", seen, pg("7714", "00000002", "garbage"), rec, fence.Proceed},
		{"galera: another node behind this one", gmem, galera("n2:3306", "100"), grec, fence.Proceed},
		{"galera: the same node ahead", gmem, galera("n1:3306", "901"), grec, fence.Proceed},
		{"galera: the same node back", gmem, galera("n1:3306", "899"), grec, fence.Fence},
		{"galera: another cluster", gmem, fence.Identity{Kind: fence.Galera, System: "c2", Position: "5", Node: "n1:3306"}, grec, fence.Fence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fence.Decide(tc.mem, tc.cur, tc.rec); got.Verdict != tc.want {
				t.Errorf("Decide = %v (%s), want %v", got.Verdict, got.Reason, tc.want)
			}
		})
	}
}

func TestObserve_PositionsNeverGoBack(t *testing.T) {
	rec := fence.Record{Identity: pg("1", "00000001", ""), Generation: 5}
	m := fence.Memory{}.Observe(pg("1", "00000001", "0/200"), rec)
	// A slow reading that finishes after a later one.
	m = m.Observe(pg("1", "00000001", "0/100"), rec)
	if got := m.Positions[""]; got != "0/200" {
		t.Fatalf("position %q after a slow reading, want 0/200", got)
	}
	// A reading from before a fence this process saw changes nothing.
	newer := fence.Record{Identity: pg("1", "00000002", ""), Generation: 9}
	m = m.Observe(pg("1", "00000002", "0/300"), newer)
	if m2 := m.Observe(pg("1", "00000001", "0/900"), rec); m2.Generation != 9 || m2.Identity.Timeline != "00000002" {
		t.Fatalf("a stale reading moved the memory: %+v", m2)
	}
	if m.Positions[""] != "0/300" {
		t.Fatalf("after a new record the positions start afresh: %v", m.Positions)
	}
}

func TestBehind(t *testing.T) {
	const u1, u2 = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4e11fa47-71ca-11e1-9e33-c80aa9429562"
	for _, tc := range []struct {
		kind      fence.Kind
		cur, seen string
		want      bool
	}{
		{fence.Postgres, "16/B374D848", "16/B374D847", false},
		{fence.Postgres, "16/B374D848", "17/0", true},
		{fence.Postgres, "0/0", "", false},
		{fence.MySQL, u1 + ":1-10", u1 + ":1-5", false},
		{fence.MySQL, u1 + ":1-10,\n" + u2 + ":1-3", u1 + ":1-5:7-9," + u2 + ":2", false},
		{fence.MySQL, u1 + ":1-4:6-10", u1 + ":1-5", true},
		{fence.MySQL, u1 + ":1-5:6-10", u1 + ":1-10", false},
		{fence.MySQL, u1 + ":1-10", u2 + ":1", true},
		{fence.MySQL, u1 + ":1-10:a:1-3", u1 + ":a:2", false},
		{fence.MySQL, u1 + ":1-10", u1 + ":a:2", true},
		{fence.MariaDB, "0-1-100", "0-1-99", false},
		{fence.MariaDB, "0-2-100,1-1-7", "0-1-101", true},
		{fence.MariaDB, "0-2-100", "0-1-90,1-1-7", true},
		{fence.Galera, "10", "11", true},
		{fence.SQLite, "12", "11", false},
	} {
		got, err := fence.Behind(tc.kind, tc.cur, tc.seen)
		if err != nil || got != tc.want {
			t.Errorf("Behind(%s, %q, %q) = %v, %v; want %v", tc.kind, tc.cur, tc.seen, got, err, tc.want)
		}
	}
	for _, bad := range []struct {
		kind fence.Kind
		s    string
	}{{fence.Postgres, "12"}, {fence.MySQL, "x:1"}, {fence.MariaDB, "0-1"}, {fence.Galera, "-1"}} {
		if _, err := fence.Behind(bad.kind, bad.s, bad.s); err == nil {
			t.Errorf("Behind(%s, %q) accepted it", bad.kind, bad.s)
		}
	}
}

func TestNewPlan(t *testing.T) {
	c, err := fence.Config{}.Check()
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_800_000_000_000)
	p := fence.NewPlan(c, now, fence.Record{Generation: 5}, fence.Memory{}, fence.Identity{}, fence.Live{Count: 3})
	if p.Margin != 2*fence.DefaultRangeCap*4*fence.MinFailovers || p.Failovers != fence.MinFailovers || p.RangeCap != fence.DefaultRangeCap {
		t.Errorf("automatic margin with 3 live leases = %d (failovers %d), want 2 × %d × 4 × %d", p.Margin, p.Failovers, fence.DefaultRangeCap, fence.MinFailovers)
	}
	// The store says an instance reserves more at once than this
	// process's own cap (a larger --max-step, or a row step above it):
	// the margin is sized from what the store says.
	wide := fence.NewPlan(c, now, fence.Record{Generation: 5}, fence.Memory{}, fence.Identity{}, fence.Live{Count: 3, RangeCap: 30_000_000})
	if wide.RangeCap != 30_000_000 || wide.Margin != 2*30_000_000*4*fence.MinFailovers {
		t.Errorf("margin with a recorded cap of 30,000,000: %d (cap %d), want 2 × 30,000,000 × 4 × %d", wide.Margin, wide.RangeCap, fence.MinFailovers)
	}
	if narrow := fence.NewPlan(c, now, fence.Record{Generation: 5}, fence.Memory{}, fence.Identity{}, fence.Live{Count: 3, RangeCap: 10}); narrow.Margin != p.Margin {
		t.Errorf("a recorded cap below the fencer's lowered the margin to %d", narrow.Margin)
	}
	if want := now.UnixMilli() + 33_000; p.HoldUntil != want {
		t.Errorf("HoldUntil = %d, want now + TTL + TTL/10 = %d", p.HoldUntil, want)
	}
	if p.LiveSince != now.UnixMilli()-30_000 {
		t.Errorf("LiveSince = %d, want now - TTL", p.LiveSince)
	}
	if p.Generation != now.UnixMilli() {
		t.Errorf("Generation = %d, want the time, above 5", p.Generation)
	}
	if g := fence.NewGeneration(fence.Record{Generation: now.UnixMilli() + 10}, fence.Memory{}, now); g != now.UnixMilli()+11 {
		t.Errorf("NewGeneration after a record ahead of the clock = %d, want it plus 1", g)
	}
	c.Margin = 42
	if p := fence.NewPlan(c, now, fence.Record{}, fence.Memory{}, fence.Identity{}, fence.Live{Count: 100}); p.Margin != 42*fence.MinFailovers {
		t.Errorf("explicit margin 42: %d, want it once per failover counted (%d)", p.Margin, fence.MinFailovers)
	}
	if _, err := (fence.Config{Margin: -1}).Check(); err == nil {
		t.Error("a negative margin was accepted")
	}
}

// A record newer than the one a process saw is trusted unless it covers
// less than what the process saw: then the fence that wrote what the
// process saw was lost, and the newer record was written without it.
func TestDecide_LostFence(t *testing.T) {
	id := pg("7714", "00000003", "0/3000000")
	mem := fence.Memory{}.Observe(pg("7714", "00000002", "0/2000000"), fence.Record{Identity: pg("7714", "00000002", ""), Generation: 200, Floor: 900})
	for _, tc := range []struct {
		name string
		rec  fence.Record
		want fence.Verdict
	}{
		{"a descendant covers what the process saw", fence.Record{Identity: pg("7714", "00000003", ""), Generation: 300, Covers: 200, Floor: 1800}, fence.Proceed},
		{"a descendant covers more", fence.Record{Identity: pg("7714", "00000003", ""), Generation: 400, Covers: 300, Floor: 2700}, fence.Proceed},
		{"written without the fence the process saw", fence.Record{Identity: pg("7714", "00000003", ""), Generation: 300, Covers: 100, Floor: 900}, fence.Fence},
		{"covers unknown (a record from before Covers)", fence.Record{Identity: pg("7714", "00000003", ""), Generation: 300}, fence.Proceed},
		{"the same generation on another history", fence.Record{Identity: pg("7714", "00000003", ""), Generation: 200, Covers: 100}, fence.Fence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fence.Decide(mem, id, tc.rec); got.Verdict != tc.want {
				t.Errorf("Decide = %v (%s), want %v", got.Verdict, got.Reason, tc.want)
			}
		})
	}
}

// The floor a process saw outlives the record the store lost, and a
// record read without its floor (from memory) leaves it.
func TestObserve_Floor(t *testing.T) {
	id := pg("1", "00000001", "0/100")
	for _, tc := range []struct {
		name  string
		steps []fence.Record
		want  int64
	}{
		{"a newer record raises it", []fence.Record{{Generation: 5, Floor: 10}, {Generation: 9, Floor: 30}}, 30},
		{"a record read without its floor leaves it", []fence.Record{{Generation: 5, Floor: 10}, {Generation: 5}}, 10},
		{"a newer record with a lower floor leaves it", []fence.Record{{Generation: 5, Floor: 30}, {Generation: 9, Floor: 10}}, 30},
		{"a stale reading with a higher floor raises it", []fence.Record{{Generation: 9, Floor: 10}, {Generation: 5, Floor: 20}}, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m fence.Memory
			for _, r := range tc.steps {
				r.Identity = id
				m = m.Observe(id, r)
			}
			if m.Floor != tc.want {
				t.Errorf("floor %d, want %d", m.Floor, tc.want)
			}
		})
	}
}

func TestNewPlan_LostFences(t *testing.T) {
	tl := func(timeline int, gen, floor int64) fence.Record {
		return fence.Record{Identity: pg("1", fmt.Sprintf("%08X", timeline), ""), Generation: gen, Floor: floor}
	}
	c, err := fence.Config{RangeCap: 100}.Check()
	if err != nil {
		t.Fatal(err)
	}
	const base = 2 * 100 * 3 // two live leases
	now := time.UnixMilli(1_800_000_000_000)
	saw := func(gen, floor int64) fence.Memory {
		return fence.Memory{}.Observe(pg("1", "00000002", ""), fence.Record{Identity: pg("1", "00000002", ""), Generation: gen, Floor: floor})
	}
	for _, tc := range []struct {
		name                      string
		rec                       fence.Record
		mem                       fence.Memory
		cur                       fence.Identity
		margin, lost, floor, covs int64
	}{
		// Every fence counts at least two failovers (fence.MinFailovers).
		{"first fence, fresh process", fence.Record{Generation: 10}, fence.Memory{}, fence.Identity{}, 2 * base, 0, 2 * base, 10},
		{"the record is the one the process saw", fence.Record{Generation: 10, Floor: 5000}, saw(10, 5000), fence.Identity{}, 2 * base, 0, 5000 + 2*base, 10},
		// A second failover lost one fence of margin 600 and the
		// process saw it: both margins, from the rows before it.
		{"one lost fence", fence.Record{Generation: 10, Floor: 5000}, saw(20, 5600), fence.Identity{}, base + 600, 600, 5600 + base, 20},
		{"two lost fences", fence.Record{Generation: 10, Floor: 5000}, saw(30, 6200), fence.Identity{}, base + 1200, 1200, 6200 + base, 30},
		// A record written on another branch after the lost fence
		// raised the rows from the same place: only what it did not add.
		{"a record that did not cover the lost fence", fence.Record{Generation: 25, Floor: 5400, Covers: 10}, saw(20, 5600), fence.Identity{}, 2 * base, 200, 5400 + 2*base, 25},
		{"the record's row itself lost", fence.Record{}, saw(20, 5600), fence.Identity{}, base + 5600, 5600, 5600 + base, 20},
		// The same losses seen from the server: the record is on
		// timeline 1 and the server on 3, so two failovers since, each
		// of which may have lost a fence and one lag of reservations.
		// A process that saw nothing fences two margins, not one.
		{"two failovers since the record, process saw nothing", tl(1, 10, 5000), fence.Memory{}, pg("1", "00000003", ""), 2 * base, 0, 5000 + 2*base, 10},
		{"two failovers since the record, process saw the lost fence", tl(1, 10, 5000), saw(20, 5600), pg("1", "00000003", ""), 2 * base, 600, 5000 + 2*base, 20},
		{"lost margins beyond the failovers' count", tl(1, 10, 5000), saw(30, 7000), pg("1", "00000003", ""), base + 2000, 2000, 7000 + base, 30},
		{"another system counts the fewest", tl(1, 10, 5000), fence.Memory{}, pg("2", "00000009", ""), 2 * base, 0, 5000 + 2*base, 10},
		{"a process behind the record adds nothing", fence.Record{Generation: 30, Floor: 9000}, saw(20, 5600), fence.Identity{}, 2 * base, 0, 9000 + 2*base, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fence.NewPlan(c, now, tc.rec, tc.mem, tc.cur, fence.Live{Count: 2})
			if p.Margin != tc.margin || p.Lost != tc.lost || p.Floor != tc.floor || p.Covers != tc.covs {
				t.Errorf("margin %d, lost %d, floor %d, covers %d; want %d, %d, %d, %d", p.Margin, p.Lost, p.Floor, p.Covers, tc.margin, tc.lost, tc.floor, tc.covs)
			}
		})
	}
	c.Margin = math.MaxInt64 - 10
	if p := fence.NewPlan(c, now, fence.Record{Generation: 1, Floor: 100}, saw(2, 200), fence.Identity{}, fence.Live{Count: 0}); p.Margin != math.MaxInt64 || p.Floor != math.MaxInt64 {
		t.Errorf("a margin past the limit: margin %d, floor %d, want both saturated", p.Margin, p.Floor)
	}
}

func TestStart(t *testing.T) {
	for _, tc := range []struct {
		floor, start, want int64
	}{
		{0, 1, 1},
		{8_000_000, 1, 8_000_001},
		{8_000_000, 500, 8_000_500},
		{100, math.MaxInt64 - 50, math.MaxInt64},
	} {
		if got := fence.Start(fence.Record{Generation: 1, Floor: tc.floor}, tc.start); got != tc.want {
			t.Errorf("Start(floor %d, %d) = %d, want %d", tc.floor, tc.start, got, tc.want)
		}
	}
}

func TestHolding(t *testing.T) {
	c, err := fence.Config{LeaseTTL: 30 * time.Second}.Check()
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_800_000_000_000)
	rec := fence.Record{Generation: 50, FenceUntil: now.UnixMilli() + 33_000}
	heldSince := c.HeldSince(rec)
	if want := now.UnixMilli() - 30_000; heldSince != want {
		t.Fatalf("HeldSince = %d, want the fence's LiveSince %d", heldSince, want)
	}
	for _, tc := range []struct {
		name string
		rec  fence.Record
		at   time.Time
		ws   []fence.Worker
		want int
	}{
		{"a held lease not checked in", rec, now, []fence.Worker{{Owned: true, Expires: rec.FenceUntil, Seen: 49}}, 1},
		{"checked in against the fence's record", rec, now, []fence.Worker{{Owned: true, Expires: rec.FenceUntil, Seen: 50}}, 0},
		{"checked in against a newer one", rec, now, []fence.Worker{{Owned: true, Expires: rec.FenceUntil, Seen: 51}}, 0},
		{"released", rec, now, []fence.Worker{{Expires: rec.FenceUntil}}, 0},
		{"lapsed before the fence", rec, now, []fence.Worker{{Owned: true, Expires: heldSince, Seen: 1}}, 0},
		{"lapsed, but counted by the fence", rec, now, []fence.Worker{{Owned: true, Expires: heldSince - 5000, Seen: fence.MustCheckIn}}, 1},
		{"the hold is over", rec, time.UnixMilli(rec.FenceUntil), []fence.Worker{{Owned: true, Expires: rec.FenceUntil, Seen: 1}}, 0},
		{"never fenced", fence.Record{Generation: 50}, now, []fence.Worker{{Owned: true, Expires: now.UnixMilli() + 1, Seen: 1}}, 0},
		{"two of three", rec, now, []fence.Worker{{Owned: true, Expires: rec.FenceUntil, Seen: 1}, {Owned: true, Expires: rec.FenceUntil, Seen: 50}, {Owned: true, Expires: rec.FenceUntil}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fence.Holding(c, tc.rec, tc.at, tc.ws); got != tc.want {
				t.Errorf("Holding = %d, want %d", got, tc.want)
			}
		})
	}
}

// A lapsed lease the fence counted stays its owner's while the hold
// lasts: taken over, its row would carry the new owner's check-in, and
// Holding would stop waiting for the instance that may hold lost ranges.
func TestClaimable(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	rec := fence.Record{Generation: 50, FenceUntil: now.UnixMilli() + 33_000}
	lapsed := now.UnixMilli() - 1
	for _, tc := range []struct {
		name string
		at   time.Time
		w    fence.Worker
		mine bool
		want bool
	}{
		{"no owner", now, fence.Worker{Expires: now.UnixMilli() + 5000}, false, true},
		{"live", now, fence.Worker{Owned: true, Expires: now.UnixMilli() + 1, Seen: 50}, false, false},
		{"live, its own owner", now, fence.Worker{Owned: true, Expires: now.UnixMilli() + 1, Seen: 50}, true, false},
		{"lapsed", now, fence.Worker{Owned: true, Expires: lapsed, Seen: 49}, false, true},
		{"lapsed, counted, during the hold", now, fence.Worker{Owned: true, Expires: lapsed, Seen: fence.MustCheckIn}, false, false},
		{"lapsed, counted, during the hold, its own owner", now, fence.Worker{Owned: true, Expires: lapsed, Seen: fence.MustCheckIn}, true, true},
		{"lapsed, counted, the hold is over", time.UnixMilli(rec.FenceUntil), fence.Worker{Owned: true, Expires: lapsed, Seen: fence.MustCheckIn}, false, true},
		{"counted, then released by its owner", now, fence.Worker{Expires: 0, Seen: fence.MustCheckIn}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fence.Claimable(rec, tc.at, tc.w, tc.mine); got != tc.want {
				t.Errorf("Claimable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlan_SeveralFailoversCountEveryOwnedLease(t *testing.T) {
	c, err := fence.Config{}.Check()
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_800_000_000_000)
	rec := fence.Record{Identity: pg("1", "00000001", ""), Generation: 10}
	if p := fence.NewPlan(c, now, rec, fence.Memory{}, pg("1", "00000002", ""), fence.Live{Count: 1}); p.LiveSince != now.UnixMilli()-30_000 || p.Failovers != fence.MinFailovers {
		t.Errorf("one failover: LiveSince %d, failovers %d; want now - TTL (one numbered: the leases of the last TTL), and the margin counted %d times", p.LiveSince, p.Failovers, fence.MinFailovers)
	}
	if since := c.CountSince(now, rec, pg("1", "00000004", ""), 0); since != math.MinInt64 {
		t.Errorf("three failovers: CountSince %d, want every owned lease counted", since)
	}
	// Counted, not held: a lapsed lease's owner has stopped, and its
	// worker ID may have a new holder whose claim the store lost.
	if p := fence.NewPlan(c, now, rec, fence.Memory{}, pg("1", "00000004", ""), fence.Live{Count: 1, Since: math.MinInt64}); p.LiveSince != now.UnixMilli()-30_000 || p.Failovers != 3 {
		t.Errorf("three failovers: LiveSince %d, failovers %d; want the leases live in the last TTL held, 3", p.LiveSince, p.Failovers)
	}
}

func TestCountSince_StoreStoppedLongerThanTheTTL(t *testing.T) {
	c, err := fence.Config{LeaseTTL: 30 * time.Second}.Check()
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_800_000_000_000)
	rec := fence.Record{Identity: pg("1", "00000001", ""), Generation: 10}
	cur := pg("1", "00000002", "")
	for _, tc := range []struct {
		name   string
		newest int64
		want   int64
	}{
		{"no lease", 0, now.UnixMilli() - 30_000},
		{"leases live now", now.UnixMilli() + 20_000, now.UnixMilli() - 30_000},
		// The newest lease lapsed 30 s ago: the leases live within a TTL
		// of then count, though lapsed now.
		{"a failover slower than the TTL", now.UnixMilli() - 30_000, now.UnixMilli() - 60_000},
	} {
		if got := c.CountSince(now, rec, cur, tc.newest); got != tc.want {
			t.Errorf("%s: CountSince = %d, want %d", tc.name, got, tc.want)
		}
	}
}
