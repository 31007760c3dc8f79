package snowflaketest

import (
	"context"
	"errors"
	"slices"
	"strconv"
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
// behind, so give it a database of its own. The cases are in
// leasestoresuite.go (the store contract) and leasedsuite.go (Leased over
// the store).
func RunLeaseStore(t *testing.T, open func(t *testing.T) LeaseStore) {
	su := newSuite(t, open)
	for _, c := range slices.Concat(su.storeCases(), su.leasedCases()) {
		t.Run(c.name, c.run)
	}
}

// suiteCase is one named subtest of RunLeaseStore.
type suiteCase struct {
	name string
	run  func(t *testing.T)
}

// suite is what the cases of RunLeaseStore share: the store's opener,
// the fake time of each phase, and owner names unique to the run.
type suite struct {
	ctx  context.Context
	open func(t *testing.T) LeaseStore
	run  string // suffix of every owner, so reruns on one table differ

	mu   sync.Mutex
	next time.Time
}

func newSuite(t *testing.T, open func(t *testing.T) LeaseStore) *suite {
	return &suite{
		ctx:  context.Background(),
		open: open,
		run:  strconv.FormatInt(time.Now().UnixNano()%1e9, 36),
		next: suiteStart(t, open(t)),
	}
}

// phase returns a time after every lease and timestamp in the table.
func (su *suite) phase() time.Time {
	su.mu.Lock()
	defer su.mu.Unlock()
	su.next = su.next.Add(10 * time.Minute)
	return su.next
}

func (su *suite) owner(name string) string { return name + "-" + su.run }

func (su *suite) claim(t *testing.T, s snowflake.LeaseStore, who string, now time.Time, maxWorkers int64) snowflake.Lease {
	t.Helper()
	l, err := s.Claim(su.ctx, su.owner(who), now, suiteTTL, maxWorkers)
	if err != nil {
		t.Fatalf("Claim(%s, %v, max %d): %v", who, now.Format(time.RFC3339Nano), maxWorkers, err)
	}
	return l
}

// newLeased is a Leased generator on s whose heartbeat the test drives.
func (su *suite) newLeased(t *testing.T, s snowflake.LeaseStore, c *Clock, who string) *snowflake.Leased {
	t.Helper()
	l, err := snowflake.NewLeased(su.ctx, s, snowflake.LeasedConfig{
		Generator:     snowflake.Config{Clock: c},
		Owner:         su.owner(who),
		TTL:           suiteTTL,
		RenewInterval: -1, // the test calls Heartbeat
	})
	if err != nil {
		t.Fatalf("NewLeased(%s): %v", who, err)
	}
	t.Cleanup(func() { _ = l.Shutdown(su.ctx) })
	return l
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
