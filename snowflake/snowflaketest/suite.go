package snowflaketest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/snowflake"
)

// LeaseStore is what RunLeaseStore needs: a snowflake.LeaseStore that can
// also list its worker IDs, as every store in idgen can.
type LeaseStore interface {
	snowflake.LeaseStore
	// Workers returns the table's worker IDs, free or leased, ordered by
	// worker ID.
	Workers(ctx context.Context) ([]snowflake.Lease, error)
}

// suiteTTL is the lease TTL of the suite; its Margin is the default TTL/10.
const suiteTTL = 30 * time.Second

// RunLeaseStore is the conformance suite of snowflake.LeaseStore, run by
// every backend: first the store's methods one by one, then Leased
// generators on it, claiming, renewing, being fenced off, taking over and
// releasing worker IDs on fake clocks.
//
// open returns a new handle on one shared database each time it is called:
// for a SQL store a new connection pool, as another process would have,
// with the schema in place. Subtests share the table; each runs at its own
// fake time, ten minutes after the previous one's, so that the leases
// earlier subtests left behind have all expired. The first such time is
// now, or after the latest time already in the table, so the suite can run
// again on the same database; it leaves leases a few hours in the future
// behind, so give it a database of its own.
func RunLeaseStore(t *testing.T, open func(t *testing.T) LeaseStore) {
	ctx := context.Background()
	var phaseMu sync.Mutex
	next := suiteStart(t, open(t))
	// phase returns a time after every lease and timestamp in the table.
	phase := func() time.Time {
		phaseMu.Lock()
		defer phaseMu.Unlock()
		next = next.Add(10 * time.Minute)
		return next
	}
	run := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	owner := func(name string) string { return name + "-" + run }
	claim := func(t *testing.T, s snowflake.LeaseStore, who string, now time.Time, maxWorkers int64) snowflake.Lease {
		t.Helper()
		l, err := s.Claim(ctx, owner(who), now, suiteTTL, maxWorkers)
		if err != nil {
			t.Fatalf("Claim(%s, %v, max %d): %v", who, now.Format(time.RFC3339Nano), maxWorkers, err)
		}
		return l
	}

	t.Run("Claim/LowestFreeFirst", func(t *testing.T) {
		s := open(t)
		now := phase()
		a := claim(t, s, "a", now, 1024)
		if a.WorkerID != 0 || a.Owner != owner("a") || !a.ExpiresAt.Equal(now.Add(suiteTTL)) || a.LastTimestamp.After(now) {
			t.Errorf("first claim = %+v; want worker 0, owner %q, expiring at %v, LastTimestamp not after now", a, owner("a"), now.Add(suiteTTL))
		}
		if b := claim(t, s, "b", now, 1024); b.WorkerID != 1 {
			t.Errorf("second claim got worker %d, want 1", b.WorkerID)
		}
		// Whole milliseconds: what the table holds.
		c := claim(t, s, "c", now.Add(1500*time.Microsecond), 1024)
		if !c.ExpiresAt.Equal(now.Add(time.Millisecond + suiteTTL)) {
			t.Errorf("claim at now+1.5ms expires at %v, want %v", c.ExpiresAt, now.Add(time.Millisecond+suiteTTL))
		}
	})

	t.Run("Claim/RejectsBadArguments", func(t *testing.T) {
		s := open(t)
		now := phase()
		tests := []struct {
			name       string
			owner      string
			ttl        time.Duration
			maxWorkers int64
		}{
			{"empty owner", "", suiteTTL, 1024},
			{"owner of 129 bytes", strings.Repeat("o", 129), suiteTTL, 1024},
			{"zero TTL", owner("x"), 0, 1024},
			{"TTL under a millisecond", owner("x"), 999 * time.Microsecond, 1024},
			{"no worker IDs", owner("x"), suiteTTL, 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				l, err := s.Claim(ctx, tt.owner, now, tt.ttl, tt.maxWorkers)
				if err == nil || errors.Is(err, snowflake.ErrNoFreeWorker) {
					t.Fatalf("Claim = %+v, %v; want an argument error", l, err)
				}
			})
		}
	})

	t.Run("Claim/NoFreeWorker", func(t *testing.T) {
		s := open(t)
		now := phase()
		a, b := claim(t, s, "a", now, 2), claim(t, s, "b", now, 2)
		if a.WorkerID == b.WorkerID {
			t.Fatalf("a and b both got worker %d", a.WorkerID)
		}
		_, err := s.Claim(ctx, owner("c"), now.Add(suiteTTL-time.Millisecond), suiteTTL, 2)
		if !errors.Is(err, snowflake.ErrNoFreeWorker) {
			t.Fatalf("third claim of 2 worker IDs = %v, want ErrNoFreeWorker", err)
		}
		// At the expiry, both are free again; the lowest is taken.
		if c := claim(t, s, "c", now.Add(suiteTTL), 2); c.WorkerID != 0 {
			t.Errorf("claim at the expiry got worker %d, want 0", c.WorkerID)
		}
	})

	// 16 claimers, each with its own pool, claim 5 worker IDs each at the
	// same time: 80, more than a store may have created rows for yet.
	t.Run("Claim/ConcurrentClaimsAreDistinct", func(t *testing.T) {
		const claimers, each = 16, 5
		now := phase()
		stores := make([]LeaseStore, claimers)
		for i := range stores {
			stores[i] = open(t)
		}
		name := func(i int) string { return fmt.Sprintf("c%03d", i) }
		leases := make([]snowflake.Lease, claimers*each)
		errs := make([]error, claimers*each)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c, s := range stores {
			wg.Go(func() {
				<-start
				for i := c * each; i < (c+1)*each; i++ {
					leases[i], errs[i] = s.Claim(ctx, owner(name(i)), now, suiteTTL, 1024)
				}
			})
		}
		close(start)
		wg.Wait()
		seen := map[int64]int{}
		for i, l := range leases {
			if errs[i] != nil {
				t.Errorf("claim %d: %v", i, errs[i])
				continue
			}
			if j, dup := seen[l.WorkerID]; dup {
				t.Errorf("claims %d and %d both got worker %d", j, i, l.WorkerID)
			}
			seen[l.WorkerID] = i
			if l.WorkerID < 0 || l.WorkerID >= 1024 {
				t.Errorf("claim %d got worker %d, outside 0..1023", i, l.WorkerID)
			}
		}
		// The table agrees about who holds what.
		ws, err := stores[0].Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held := map[int64]string{}
		for _, w := range ws {
			held[w.WorkerID] = w.Owner
		}
		for i, l := range leases {
			if errs[i] == nil && held[l.WorkerID] != owner(name(i)) {
				t.Errorf("Workers says worker %d is held by %q, want claim %d's owner", l.WorkerID, held[l.WorkerID], i)
			}
		}
	})

	t.Run("Renew", func(t *testing.T) {
		s := open(t)
		now := phase()
		a := claim(t, s, "a", now, 1)
		r, err := s.Renew(ctx, a, now.Add(time.Second), now.Add(500*time.Millisecond), suiteTTL)
		if err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if r.WorkerID != a.WorkerID || r.Owner != a.Owner || !r.ExpiresAt.Equal(now.Add(time.Second+suiteTTL)) ||
			r.LastTimestamp.Before(now.Add(500*time.Millisecond)) {
			t.Errorf("Renew = %+v; want worker %d, expiry %v, LastTimestamp at least %v", r, a.WorkerID, now.Add(time.Second+suiteTTL), now.Add(500*time.Millisecond))
		}
		// A smaller LastTimestamp does not move the stored one back.
		if _, err := s.Renew(ctx, r, now.Add(2*time.Second), now.Add(100*time.Millisecond), suiteTTL); err != nil {
			t.Fatalf("second Renew: %v", err)
		}
		if w := worker(t, s, a.WorkerID); !w.LastTimestamp.Equal(now.Add(500*time.Millisecond)) || !w.ExpiresAt.Equal(now.Add(2*time.Second+suiteTTL)) {
			t.Errorf("stored %+v; want LastTimestamp %v, expiry %v", w, now.Add(500*time.Millisecond), now.Add(2*time.Second+suiteTTL))
		}

		notOurs := r
		notOurs.Owner = owner("intruder")
		if _, err := s.Renew(ctx, notOurs, now.Add(3*time.Second), now, suiteTTL); !errors.Is(err, snowflake.ErrLeaseLost) {
			t.Errorf("Renew by another owner = %v, want ErrLeaseLost", err)
		}
		expiry := now.Add(2*time.Second + suiteTTL)
		if _, err := s.Renew(ctx, r, expiry, now, suiteTTL); !errors.Is(err, snowflake.ErrLeaseLost) {
			t.Errorf("Renew at the expiry = %v, want ErrLeaseLost", err)
		}
	})

	// A holder whose clock stepped back renews with an earlier now: the
	// stored expiry must not move back, or a claimer could take the worker
	// ID while the holder still stamps IDs up to its old deadline.
	t.Run("Renew/NeverShortensTheLease", func(t *testing.T) {
		s := open(t)
		now := phase()
		a := claim(t, s, "a", now, 1)
		r, err := s.Renew(ctx, a, now.Add(-5*time.Second), time.Time{}, suiteTTL)
		if err != nil {
			t.Fatalf("Renew with the clock 5s back: %v", err)
		}
		if r.ExpiresAt.After(a.ExpiresAt) || r.ExpiresAt.Before(now.Add(-5*time.Second+suiteTTL)) {
			t.Errorf("Renew returned expiry %v; want at most the stored %v", r.ExpiresAt, a.ExpiresAt)
		}
		if w := worker(t, s, a.WorkerID); !w.ExpiresAt.Equal(a.ExpiresAt) {
			t.Errorf("stored expiry %v after a renewal from behind; want it kept at %v", w.ExpiresAt, a.ExpiresAt)
		}
		if _, err := s.Claim(ctx, owner("b"), a.ExpiresAt.Add(-time.Millisecond), suiteTTL, 1); !errors.Is(err, snowflake.ErrNoFreeWorker) {
			t.Errorf("claim before the first expiry = %v, want ErrNoFreeWorker", err)
		}
	})

	t.Run("Static", func(t *testing.T) {
		st, ok := open(t).(snowflake.StaticLeaseStore)
		if !ok {
			t.Skip("not a StaticLeaseStore")
		}
		now := phase()
		// Worker 0 is taken by a lease: a static claim of it is refused.
		leased := claim(t, st, "leased", now, 1)
		if _, err := st.ClaimStatic(ctx, owner("static"), leased.WorkerID, now.Add(time.Second), suiteTTL); !errors.Is(err, snowflake.ErrNoFreeWorker) {
			t.Fatalf("static claim of a live leased worker = %v, want ErrNoFreeWorker", err)
		}
		if err := st.Release(ctx, leased, now.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		a, err := st.ClaimStatic(ctx, owner("static"), 0, now.Add(3*time.Second), suiteTTL)
		if err != nil {
			t.Fatalf("static claim of a free worker: %v", err)
		}
		if a.WorkerID != 0 || a.LastTimestamp.Before(now.Add(2*time.Second)) {
			t.Fatalf("static claim = %+v; want worker 0 above the released floor %v", a, now.Add(2*time.Second))
		}
		if _, err := st.ClaimStatic(ctx, owner("other"), 0, now.Add(4*time.Second), suiteTTL); !errors.Is(err, snowflake.ErrNoFreeWorker) {
			t.Fatalf("second static claim of a live worker = %v, want ErrNoFreeWorker", err)
		}
		if err := st.Release(ctx, a, now.Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		// Released, and even long after: pinned, never leased.
		if _, err := st.Claim(ctx, owner("leased2"), now.Add(5*time.Minute), suiteTTL, 1); !errors.Is(err, snowflake.ErrNoFreeWorker) {
			t.Fatalf("leased claim of a pinned worker = %v, want ErrNoFreeWorker", err)
		}
		b, err := st.ClaimStatic(ctx, owner("static"), 0, now.Add(5*time.Minute), suiteTTL)
		if err != nil || b.LastTimestamp.Before(now.Add(5*time.Second)) {
			t.Fatalf("static restart = %+v, %v; want the floor %v", b, err, now.Add(5*time.Second))
		}
		if err := st.Release(ctx, b, now.Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := st.Unpin(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if c := claim(t, st, "leased3", now.Add(5*time.Minute+time.Second), 1); c.WorkerID != 0 || c.LastTimestamp.Before(now.Add(5*time.Minute)) {
			t.Fatalf("leased claim after Unpin = %+v; want worker 0 above %v", c, now.Add(5*time.Minute))
		}
	})

	t.Run("ExpiredLeaseIsTakenOver", func(t *testing.T) {
		s := open(t)
		now := phase()
		a := claim(t, s, "a", now, 1)
		a, err := s.Renew(ctx, a, now.Add(time.Second), now.Add(time.Second), suiteTTL)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, owner("b"), a.ExpiresAt.Add(-time.Millisecond), suiteTTL, 1); !errors.Is(err, snowflake.ErrNoFreeWorker) {
			t.Fatalf("claim a millisecond before the expiry = %v, want ErrNoFreeWorker", err)
		}
		b := claim(t, s, "b", a.ExpiresAt, 1)
		// a may have issued IDs after its last renewal, up to its expiry.
		if b.WorkerID != a.WorkerID || !b.LastTimestamp.Equal(a.ExpiresAt) {
			t.Errorf("takeover = %+v; want worker %d with LastTimestamp at a's expiry %v", b, a.WorkerID, a.ExpiresAt)
		}
		if w := worker(t, s, b.WorkerID); w.Owner != b.Owner || w.LastTimestamp.Before(a.ExpiresAt) {
			t.Errorf("stored %+v after the takeover; want owner %q and the floor %v kept", w, b.Owner, a.ExpiresAt)
		}
		if _, err := s.Renew(ctx, a, a.ExpiresAt, a.ExpiresAt, suiteTTL); !errors.Is(err, snowflake.ErrLeaseLost) {
			t.Errorf("Renew by the old owner = %v, want ErrLeaseLost", err)
		}
		if err := s.Release(ctx, a, a.ExpiresAt); !errors.Is(err, snowflake.ErrLeaseLost) {
			t.Errorf("Release by the old owner = %v, want ErrLeaseLost", err)
		}
		if _, err := s.Renew(ctx, b, a.ExpiresAt.Add(time.Second), time.Time{}, suiteTTL); err != nil {
			t.Errorf("Renew by the new owner: %v", err)
		}
	})

	t.Run("ReleaseFreesAtOnce", func(t *testing.T) {
		s := open(t)
		now := phase()
		a := claim(t, s, "a", now, 1)
		if err := s.Release(ctx, a, now.Add(2*time.Millisecond)); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if w := worker(t, s, a.WorkerID); w.Owner != "" || !w.LastTimestamp.Equal(now.Add(2*time.Millisecond)) {
			t.Errorf("stored %+v after Release; want no owner and LastTimestamp %v", w, now.Add(2*time.Millisecond))
		}
		if err := s.Release(ctx, a, now); !errors.Is(err, snowflake.ErrLeaseLost) {
			t.Errorf("second Release = %v, want ErrLeaseLost", err)
		}
		if _, err := s.Renew(ctx, a, now.Add(time.Millisecond), now, suiteTTL); !errors.Is(err, snowflake.ErrLeaseLost) {
			t.Errorf("Renew after Release = %v, want ErrLeaseLost", err)
		}
		// Long before the expiry; the released lease's floor is the
		// LastTimestamp its holder reported, not the expiry.
		b := claim(t, s, "b", now.Add(time.Millisecond), 1)
		if b.WorkerID != a.WorkerID || !b.LastTimestamp.Equal(now.Add(2*time.Millisecond)) {
			t.Errorf("claim after Release = %+v; want worker %d with LastTimestamp %v", b, a.WorkerID, now.Add(2*time.Millisecond))
		}
	})

	// From here on, Leased generators on the store.
	newLeased := func(t *testing.T, s snowflake.LeaseStore, c *Clock, who string) *snowflake.Leased {
		t.Helper()
		l, err := snowflake.NewLeased(ctx, s, snowflake.LeasedConfig{
			Generator:     snowflake.Config{Clock: c},
			Owner:         owner(who),
			TTL:           suiteTTL,
			RenewInterval: -1, // the test calls Heartbeat
		})
		if err != nil {
			t.Fatalf("NewLeased(%s): %v", who, err)
		}
		t.Cleanup(func() { _ = l.Shutdown(ctx) })
		return l
	}

	t.Run("Leased/TwoInstancesGetDistinctWorkers", func(t *testing.T) {
		now := phase()
		a := newLeased(t, open(t), NewClock(now), "a")
		b := newLeased(t, open(t), NewClock(now), "b")
		if a.WorkerID() == b.WorkerID() || a.WorkerID() < 0 || b.WorkerID() < 0 {
			t.Fatalf("worker IDs %d and %d; want two distinct ones", a.WorkerID(), b.WorkerID())
		}
		var all []int64
		for _, l := range []*snowflake.Leased{a, b} {
			ids, err := l.NextN(ctx, "suite", 5000)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, ids...)
		}
		if d := duplicates(all); d != 0 {
			t.Fatalf("%d duplicates among %d IDs", d, len(all))
		}
	})

	t.Run("Leased/TakeoverHonoursTheFloor", func(t *testing.T) {
		now := phase()
		ca := NewClock(now)
		a := newLeased(t, open(t), ca, "a")
		var aIDs []int64
		issue := func(l *snowflake.Leased, ids *[]int64, n int) {
			t.Helper()
			got, err := l.NextN(ctx, "suite", n)
			if err != nil {
				t.Fatalf("NextN: %v", err)
			}
			*ids = append(*ids, got...)
		}
		issue(a, &aIDs, 100)
		ca.Advance(10 * time.Second)
		if err := a.Heartbeat(ctx); err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		// IDs after the last renewal are not in the table; a then stalls.
		ca.Advance(15 * time.Second)
		issue(a, &aIDs, 100)
		expiry, worker := a.LeaseExpiry(), a.WorkerID()

		cb := NewClock(expiry)
		b := newLeased(t, open(t), cb, "b")
		if b.WorkerID() != worker {
			t.Fatalf("b got worker %d; want a's expired worker %d, the lowest free", b.WorkerID(), worker)
		}
		var bIDs []int64
		issue(b, &bIDs, 100)
		if p, _ := b.Layout().Decode(bIDs[0]); !p.Time.After(expiry) || bIDs[0] <= slices.Max(aIDs) {
			t.Errorf("b's first ID %d is stamped %v; want after a's expiry %v and above a's IDs (max %d)", bIDs[0], p.Time, expiry, slices.Max(aIDs))
		}

		// a's clock is 5s behind b's: a still believes in its lease and
		// issues under the same worker ID as b, but stamps its IDs before
		// its deadline, and b after a's expiry.
		ca.Advance(10 * time.Second)
		issue(a, &aIDs, 100)
		if p, _ := a.Layout().Decode(aIDs[len(aIDs)-1]); p.WorkerID != worker {
			t.Fatalf("a issued under worker %d before its deadline, want %d", p.WorkerID, worker)
		}
		// Then a's machine is suspended for 10s: its wall clock jumps
		// ahead of b's, its monotonic clock does not. The monotonic
		// deadline is still 2s away, but a must not stamp IDs past it,
		// where b issues.
		ca.StepWall(10 * time.Second)
		if _, err := a.Next(ctx, "suite"); !errors.Is(err, snowflake.ErrNoWorkerLease) {
			t.Fatalf("a's Next after its wall clock passed its deadline = %v, want ErrNoWorkerLease", err)
		}
		cb.Advance(5 * time.Second) // b is where a's wall clock is now
		issue(b, &bIDs, 100)
		// a's next heartbeat finds the lease expired and moves it to
		// another worker ID.
		if err := a.Heartbeat(ctx); err != nil {
			t.Fatalf("a's Heartbeat after the takeover: %v", err)
		}
		if a.WorkerID() == worker || a.WorkerID() < 0 || a.Ready() != nil {
			t.Fatalf("a after re-claiming: worker %d, Ready %v; want a worker other than %d, ready", a.WorkerID(), a.Ready(), worker)
		}
		issue(a, &aIDs, 100)
		issue(b, &bIDs, 100)
		if d := duplicates(append(slices.Clone(aIDs), bIDs...)); d != 0 {
			t.Fatalf("%d duplicates between a and b", d)
		}
		if !slices.IsSorted(aIDs) {
			t.Errorf("a's IDs are not increasing across the change of worker ID")
		}
	})

	t.Run("Leased/LostLeaseIsReclaimed", func(t *testing.T) {
		now := phase()
		s := open(t)
		a := newLeased(t, s, NewClock(now), "a")
		worker := a.WorkerID()
		// b's clock is far ahead: it sees a's lease expired and takes it.
		b := claim(t, s, "b", a.LeaseExpiry(), 1024)
		if b.WorkerID != worker {
			t.Fatalf("b got worker %d, want a's %d", b.WorkerID, worker)
		}
		// a's heartbeat, long before its own deadline, learns of it at once.
		if err := a.Heartbeat(ctx); err != nil {
			t.Fatalf("Heartbeat after losing the lease: %v", err)
		}
		if a.WorkerID() == worker || a.WorkerID() < 0 || a.Ready() != nil {
			t.Fatalf("after losing worker %d: worker %d, Ready %v; want another worker, ready", worker, a.WorkerID(), a.Ready())
		}
	})

	t.Run("Leased/FencedWhileTheStoreFails", func(t *testing.T) {
		now := phase()
		c := NewClock(now)
		fs := &flaky{LeaseStore: open(t)}
		l := newLeased(t, fs, c, "a")
		var ids []int64
		take := func() {
			t.Helper()
			id, err := l.Next(ctx, "suite")
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			ids = append(ids, id)
		}
		take()
		expiry, worker := l.LeaseExpiry(), l.WorkerID()
		deadline := expiry.Add(-suiteTTL / 10)

		fs.fail.Store(true)
		c.Advance(10 * time.Second)
		if err := l.Heartbeat(ctx); !errors.Is(err, errInjected) {
			t.Fatalf("Heartbeat with the store failing = %v, want the store's error", err)
		}
		// Time is left on the lease: still issuing.
		if err := l.Ready(); err != nil {
			t.Fatalf("Ready before the deadline = %v", err)
		}
		take()

		// At the deadline, the generator stops by itself, heartbeat or not.
		c.Advance(deadline.Sub(c.Wall()))
		if _, err := l.Next(ctx, "suite"); !errors.Is(err, snowflake.ErrNoWorkerLease) {
			t.Fatalf("Next at the deadline = %v, want ErrNoWorkerLease", err)
		}
		if err := l.Heartbeat(ctx); !errors.Is(err, errInjected) {
			t.Fatalf("Heartbeat at the deadline = %v, want the store's error", err)
		}
		if err := l.Ready(); !errors.Is(err, snowflake.ErrNoWorkerLease) || !errors.Is(err, errInjected) {
			t.Fatalf("Ready when fenced = %v; want ErrNoWorkerLease with the store's error", err)
		}
		if l.WorkerID() != -1 || !l.LeaseExpiry().IsZero() {
			t.Errorf("fenced: WorkerID %d, LeaseExpiry %v; want -1 and zero", l.WorkerID(), l.LeaseExpiry())
		}

		// The store heals before the lease expires: renewed, same worker.
		fs.fail.Store(false)
		if err := l.Heartbeat(ctx); err != nil {
			t.Fatalf("Heartbeat after healing: %v", err)
		}
		if l.Ready() != nil || l.WorkerID() != worker || !l.LeaseExpiry().After(expiry) {
			t.Fatalf("after healing: Ready %v, worker %d, expiry %v; want ready on worker %d past %v", l.Ready(), l.WorkerID(), l.LeaseExpiry(), worker, expiry)
		}
		take()

		// Fails again, this time past the expiry: re-claimed once healed.
		fs.fail.Store(true)
		c.Advance(l.LeaseExpiry().Sub(c.Wall()) + time.Second)
		if err := l.Heartbeat(ctx); !errors.Is(err, errInjected) {
			t.Fatalf("Heartbeat past the expiry = %v, want the store's error", err)
		}
		if _, err := l.Next(ctx, "suite"); !errors.Is(err, snowflake.ErrNoWorkerLease) {
			t.Fatalf("Next past the expiry = %v, want ErrNoWorkerLease", err)
		}
		fs.fail.Store(false)
		if err := l.Heartbeat(ctx); err != nil {
			t.Fatalf("Heartbeat after healing: %v", err)
		}
		if err := l.Ready(); err != nil || l.WorkerID() < 0 {
			t.Fatalf("after re-claiming: Ready %v, worker %d", err, l.WorkerID())
		}
		take()
		if !slices.IsSorted(ids) || duplicates(ids) != 0 {
			t.Errorf("IDs %v are not strictly increasing across the fencing", ids)
		}
	})

	t.Run("Leased/RestartWithTheClockBehind", func(t *testing.T) {
		tests := []struct {
			behind  time.Duration // the new process's clock behind the old one's
			wantErr error         // from the first Next
		}{
			{3 * time.Millisecond, nil},
			{10 * time.Second, snowflake.ErrClockMovedBackwards},
		}
		for _, tt := range tests {
			t.Run(tt.behind.String(), func(t *testing.T) {
				now := phase()
				a := newLeased(t, open(t), NewClock(now), "a")
				last, err := a.Next(ctx, "suite")
				if err != nil {
					t.Fatal(err)
				}
				worker, lastTS := a.WorkerID(), a.LastTimestamp()
				if err := a.Shutdown(ctx); err != nil {
					t.Fatalf("Close: %v", err)
				}

				c := NewClock(now.Add(-tt.behind))
				b := newLeased(t, open(t), c, "b")
				if b.WorkerID() != worker {
					t.Fatalf("b got worker %d; want the released %d", b.WorkerID(), worker)
				}
				if err := b.Ready(); !errors.Is(err, tt.wantErr) {
					t.Errorf("Ready = %v, want %v", err, tt.wantErr)
				}
				id, err := b.Next(ctx, "suite")
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Next %v behind the persisted last timestamp = %d, %v; want %v", tt.behind, id, err, tt.wantErr)
				}
				if err != nil {
					if c.Slept() != 0 {
						t.Errorf("slept %v before refusing", c.Slept())
					}
					c.Advance(tt.behind)
					if id, err = b.Next(ctx, "suite"); err != nil {
						t.Fatalf("Next once the clock has caught up: %v", err)
					}
				} else if c.Slept() < tt.behind {
					t.Errorf("slept %v, want at least %v", c.Slept(), tt.behind)
				}
				if p, _ := b.Layout().Decode(id); id <= last || !p.Time.After(lastTS) {
					t.Errorf("b's ID %d (stamped %v) does not follow a's last %d (stamped %v)", id, p.Time, last, lastTS)
				}
			})
		}
	})

	t.Run("Leased/CloseReleasesAtOnce", func(t *testing.T) {
		now := phase()
		a := newLeased(t, open(t), NewClock(now), "a")
		worker := a.WorkerID()
		if err := a.Shutdown(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := a.Next(ctx, "suite"); !errors.Is(err, snowflake.ErrClosed) || !errors.Is(err, snowflake.ErrNoWorkerLease) {
			t.Errorf("Next after Close = %v; want ErrClosed and ErrNoWorkerLease", err)
		}
		if err := a.Ready(); !errors.Is(err, snowflake.ErrClosed) {
			t.Errorf("Ready after Close = %v, want ErrClosed", err)
		}
		if err := a.Heartbeat(ctx); !errors.Is(err, snowflake.ErrClosed) {
			t.Errorf("Heartbeat after Close = %v, want ErrClosed", err)
		}
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
		// Long before the lease would have expired.
		b := newLeased(t, open(t), NewClock(now.Add(time.Second)), "b")
		if b.WorkerID() != worker {
			t.Errorf("b got worker %d; want %d, released by a's Close", b.WorkerID(), worker)
		}
	})
}

// suiteStart returns the suite's first time: now, or later than every time
// the table holds.
func suiteStart(t *testing.T, s LeaseStore) time.Time {
	t.Helper()
	ws, err := s.Workers(context.Background())
	if err != nil {
		t.Fatalf("Workers: %v", err)
	}
	start := time.Now().UTC().Truncate(time.Second)
	if earliest := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC); start.Before(earliest) {
		start = earliest // the default layout's epoch is 2026-01-01
	}
	for _, w := range ws {
		for _, ts := range []time.Time{w.ExpiresAt, w.LastTimestamp} {
			if ts.After(start) {
				start = ts.Truncate(time.Second).Add(time.Second)
			}
		}
	}
	return start
}

func worker(t *testing.T, s LeaseStore, id int64) snowflake.Lease {
	t.Helper()
	ws, err := s.Workers(context.Background())
	if err != nil {
		t.Fatalf("Workers: %v", err)
	}
	for _, w := range ws {
		if w.WorkerID == id {
			return w
		}
	}
	t.Fatalf("Workers does not list worker %d", id)
	return snowflake.Lease{}
}

func duplicates(ids []int64) int {
	s := slices.Clone(ids)
	slices.Sort(s)
	return len(s) - len(slices.Compact(s))
}

var errInjected = errors.New("snowflaketest: injected store failure")

// flaky fails every call while fail is set, as a store cut off would.
type flaky struct {
	LeaseStore
	fail atomic.Bool
}

func (f *flaky) Claim(ctx context.Context, owner string, now time.Time, ttl time.Duration, maxWorkers int64) (snowflake.Lease, error) {
	if f.fail.Load() {
		return snowflake.Lease{}, errInjected
	}
	return f.LeaseStore.Claim(ctx, owner, now, ttl, maxWorkers)
}

func (f *flaky) Renew(ctx context.Context, l snowflake.Lease, now, last time.Time, ttl time.Duration) (snowflake.Lease, error) {
	if f.fail.Load() {
		return snowflake.Lease{}, errInjected
	}
	return f.LeaseStore.Renew(ctx, l, now, last, ttl)
}

func (f *flaky) Release(ctx context.Context, l snowflake.Lease, last time.Time) error {
	if f.fail.Load() {
		return errInjected
	}
	return f.LeaseStore.Release(ctx, l, last)
}
