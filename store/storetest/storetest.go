// Package storetest is the integration suite every networked store runs
// against a real server: the segment conformance suite, concurrent
// migrations, many instances contending for one row, an outage in the
// middle of a run, and the worker-lease conformance suite of snowflake
// mode (snowflaketest.RunLeaseStore), with each handle on its own pool.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/snowflake/snowflaketest"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/fence"
)

// Store is the one store type, which every backend's Open returns.
type Store = *store.Store

// Backend opens a store of one kind.
type Backend struct {
	Kind dbtest.Kind
	Open func(ctx context.Context, dsn string) (Store, error)
}

func (b Backend) open(t testing.TB, dsn string) Store {
	t.Helper()
	s, err := b.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", b.Kind.Name, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Run runs the whole suite.
func Run(t *testing.T, b Backend) {
	srv := dbtest.Start(t, b.Kind)

	// First, on a fresh database: instances that start together must
	// apply the schema once, without errors.
	t.Run("ConcurrentMigrate", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				s, err := b.Open(context.Background(), srv.DSN)
				if err != nil {
					t.Errorf("instance %d: open: %v", i, err)
					return
				}
				defer s.Close()
				if _, err := s.Migrate(context.Background(), nil); err != nil {
					t.Errorf("instance %d: migrate: %v", i, err)
				}
			})
		}
		wg.Wait()
	})

	shared := b.open(t, srv.DSN)
	if _, err := shared.Migrate(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// The lease TTL of every process of the suite (Fencing's and
	// Witness's): a fence of shared, such as Regression's, must hold for
	// the TTL the others renew on, or its hold, which the store keeps,
	// outlasts theirs (one --lease-ttl per store, as docs/fencing.md
	// requires).
	if err := shared.ConfigureFence(fence.Config{LeaseTTL: FenceTTL}, nil); err != nil {
		t.Fatal(err)
	}
	// A process of its own for each test that writes segments: its
	// presence lease (which its first reservation takes) ends with the
	// test, and later tests rewrite worker_node with no live process of
	// an earlier one in it. shared itself never reserves.
	proc := func(t *testing.T) Store {
		s := b.open(t, srv.DSN)
		if err := s.ConfigureFence(fence.Config{LeaseTTL: FenceTTL}, nil); err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("Conformance", func(t *testing.T) {
		s := proc(t)
		segmenttest.Run(t, func(t *testing.T) segment.Store { return s })
	})
	t.Run("Contention", func(t *testing.T) { contention(t, b, srv.DSN, proc(t)) })
	t.Run("Leases", func(t *testing.T) {
		snowflaketest.RunLeaseStore(t, func(t *testing.T) snowflaketest.LeaseStore { return b.open(t, srv.DSN).Leases() })
	})
	t.Run("Layouts", func(t *testing.T) {
		// Each case starts from a table never used, and the cases after
		// this one find it so too.
		empty := func(t *testing.T) {
			for _, q := range []string{"DELETE FROM snowflake_layout", "DELETE FROM worker_node"} {
				if _, err := shared.DB().ExecContext(context.Background(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}
		t.Cleanup(func() { empty(t) })
		snowflaketest.RunLayoutStore(t, func(t *testing.T) func(t *testing.T) snowflake.LeaseTable {
			empty(t)
			return func(t *testing.T) snowflake.LeaseTable { return b.open(t, srv.DSN).Leases() }
		})
	})
	t.Run("Regression", func(t *testing.T) {
		shared := proc(t)
		segmenttest.Regression(t, shared, func(ctx context.Context, tag string, maxID int64) error {
			// Literals: the tag is UniqueTag's, and placeholders differ by dialect.
			_, err := shared.DB().ExecContext(ctx, fmt.Sprintf("UPDATE id_sequence SET max_id = %d WHERE biz_tag = '%s'", maxID, tag))
			return err
		}, func() int64 { return Fences(t, shared.DB()) })
	})
	t.Run("OpaqueRecords", func(t *testing.T) { OpaqueRecords(t, func(t *testing.T) Store { return b.open(t, srv.DSN) }) })
	t.Run("FarFuture", func(t *testing.T) { farFuture(t, proc(t)) })
	t.Run("Fencing", func(t *testing.T) { Fencing(t, func(t *testing.T) Store { return b.open(t, srv.DSN) }) })
	t.Run("FenceFloor", func(t *testing.T) { FenceFloor(t, func(t *testing.T) Store { return b.open(t, srv.DSN) }) })
	t.Run("Witness", func(t *testing.T) { Witness(t, func(t *testing.T) Store { return b.open(t, srv.DSN) }) })
	t.Run("Holes", func(t *testing.T) { Holes(t, func(t *testing.T) Store { return b.open(t, srv.DSN) }) })
	t.Run("OwnerRenewals", func(t *testing.T) { OwnerRenewals(t, func(t *testing.T) Store { return b.open(t, srv.DSN) }) })
	t.Run("FenceCountsLapsedLeases", func(t *testing.T) {
		FenceCountsLapsedLeases(t, func(t *testing.T) Store { return b.open(t, srv.DSN) })
	})
	t.Run("Locks", func(t *testing.T) { Locks(t, func(t *testing.T) Store { return b.open(t, srv.DSN) }) })
	t.Run("LockTokens", func(t *testing.T) { LockTokens(t, func(t *testing.T) Store { return b.open(t, srv.DSN) }) })
	t.Run("Outage", func(t *testing.T) { outage(t, b) })
}

// farFuture writes a 2040 time into every updated_at column: a MySQL
// TIMESTAMP column ends in January 2038, after which every reservation
// and lease would fail.
func farFuture(t *testing.T, s Store) {
	ctx := context.Background()
	tag := segmenttest.UniqueTag("future")
	if err := s.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		fmt.Sprintf("UPDATE id_sequence SET updated_at = '2040-06-01 12:00:00' WHERE biz_tag = '%s'", tag),
		"INSERT INTO worker_node (worker_id, updated_at) VALUES (1000000, '2040-06-01 12:00:00')",
	} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tags, err := s.ListTags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range tags {
		if tg.Name == tag && tg.UpdatedAt.Year() != 2040 {
			t.Fatalf("updated_at read back as %v, want 2040", tg.UpdatedAt)
		}
	}
	if _, err := s.Reserve(ctx, tag, 0); err != nil {
		t.Fatalf("Reserve after a 2040 updated_at: %v", err)
	}
}

// contention runs 8 allocators, each with its own pool as 8 instances
// would have, with 8 goroutines each, on one row with step 10: 100,000
// IDs in 10,000 reservations that queue on one row lock. Twice that took
// 45 s on MariaDB on a quiet 2-core machine, and most of the package's
// five minutes in CI beside the reliability tests.
func contention(t *testing.T, b Backend, dsn string, admin Store) {
	const instances, workers = 8, 8
	total := 100_000
	if testing.Short() {
		total = 20_000
	}
	each := total / (instances * workers)
	ctx := context.Background()
	tag := segmenttest.UniqueTag("contention")
	const start = 1000
	if err := admin.CreateTag(ctx, segment.Tag{Name: tag, MaxID: start, Step: 10}); err != nil {
		t.Fatal(err)
	}

	type result struct {
		ids      []int64
		reserved int64 // IDs reserved by this allocator's loads
		loads    int64
	}
	results := make([]result, instances)
	fencesBefore := Fences(t, admin.DB())
	began := time.Now()
	var wg sync.WaitGroup
	for i := range instances {
		s := b.open(t, dsn)
		obs := &loadCounter{}
		a, err := segment.New(s, segment.Options{FixedStep: true, Observer: obs, WaitTimeout: 30 * time.Second, LoadTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer a.Close()
			var mu sync.Mutex
			var all []int64
			var inner sync.WaitGroup
			for range workers {
				inner.Go(func() {
					ids := make([]int64, 0, each)
					for range each {
						id, err := a.Next(ctx, tag)
						if err != nil {
							t.Errorf("instance %d: %v", i, err)
							return
						}
						if n := len(ids); n > 0 && id <= ids[n-1] {
							t.Errorf("instance %d: %d after %d, want strictly increasing", i, id, ids[n-1])
						}
						ids = append(ids, id)
					}
					mu.Lock()
					all = append(all, ids...)
					mu.Unlock()
				})
			}
			inner.Wait()
			// The allocator's own order: every ID it handed out, sorted,
			// must be unique too (checked globally below).
			results[i] = result{ids: all, reserved: obs.size.Load(), loads: obs.ok.Load()}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)

	var all []int64
	var reserved, loads int64
	for _, r := range results {
		all = append(all, r.ids...)
		reserved += r.reserved
		loads += r.loads
	}
	if d := segmenttest.Duplicates(all); d != 0 {
		t.Fatalf("%d duplicates among %d IDs", d, len(all))
	}
	// Concurrent reservations read the WAL position out of order; none of
	// that may look like a position going back.
	if n := Fences(t, admin.DB()) - fencesBefore; n != 0 {
		t.Fatalf("%d fences under contention on a store that lost nothing", n)
	}
	if len(all) != instances*workers*each {
		t.Fatalf("%d IDs, want %d", len(all), instances*workers*each)
	}
	// Close handed unused ranges back where it could, so compare the row
	// with what was reserved minus what came back: max_id must equal the
	// start plus the IDs reserved and kept.
	tags, err := admin.ListTags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var maxID int64
	for _, tg := range tags {
		if tg.Name == tag {
			maxID = tg.MaxID
		}
	}
	// A prefetch still in flight when Close cancels it may have committed
	// without its allocator hearing so: a gap of one step, never a
	// duplicate. One per instance at most.
	unheard := int64(instances * 10)
	if maxID < start+int64(len(all)) || maxID > start+reserved+unheard {
		t.Fatalf("final max_id %d: want between start+issued %d and start+reserved %d (+%d for loads cancelled by Close)",
			maxID, start+int64(len(all)), start+reserved, unheard)
	}
	slices.Sort(all)
	if all[0] < start || all[len(all)-1] >= maxID {
		t.Fatalf("IDs [%d, %d] outside the reserved span [%d, %d)", all[0], all[len(all)-1], start, maxID)
	}
	t.Logf("%s contention: %d IDs by %d instances x %d goroutines in %v (%.0f IDs/s), %d segments reserved (%d IDs), final max_id %d, 0 duplicates",
		b.Kind.Name, len(all), instances, workers, elapsed.Round(time.Millisecond), float64(len(all))/elapsed.Seconds(), loads, reserved, maxID)
}

type loadCounter struct {
	ok, size atomic.Int64
}

func (c *loadCounter) WaitedForLoad(string) {}
func (c *loadCounter) SegmentLoaded(_ string, size int64, _ time.Duration, err error) {
	if err == nil {
		c.ok.Add(1)
		c.size.Add(size)
	}
}

// outage stops the database in the middle of a run: requests beyond the
// buffered IDs must fail fast with ErrUnavailable, and the allocator must
// recover by itself when the database is back.
func outage(t *testing.T, b Backend) {
	// A container of its own, even where the tests share a server
	// (IDGEN_TEST_*_DSN): it stops the database.
	srv := dbtest.StartContainer(t, b.Kind)
	s := b.open(t, srv.DSN)
	ctx := context.Background()
	if _, err := s.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTag(ctx, segment.Tag{Name: "outage", MaxID: 1, Step: 100}); err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(s, segment.Options{FixedStep: true, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, WaitTimeout: 2 * time.Second, LoadTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var ids []int64
	take := func() error {
		id, err := a.Next(ctx, "outage")
		if err == nil {
			ids = append(ids, id)
		}
		return err
	}
	for range 150 { // into the second segment; the third is prefetched or not
		if err := take(); err != nil {
			t.Fatal(err)
		}
	}

	srv.Stop(t)
	var firstErr error
	served := 0
	for range 1000 {
		t0 := time.Now()
		err := take()
		if d := time.Since(t0); d > 10*time.Second {
			t.Fatalf("a request hung for %v while the database was down", d)
		}
		if err != nil {
			firstErr = err
			break
		}
		served++
	}
	if !errors.Is(firstErr, segment.ErrUnavailable) {
		t.Fatalf("with the database down: err = %v, want ErrUnavailable", firstErr)
	}
	// Further requests keep failing fast while it is down.
	for range 20 {
		t0 := time.Now()
		if err := take(); !errors.Is(err, segment.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("a request took %v while the database was down", d)
		}
	}

	srv.Restart(t)
	deadline := time.Now().Add(60 * time.Second)
	for take() != nil {
		if time.Now().After(deadline) {
			t.Fatal("no recovery within 60s after the database came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 300 {
		if err := take(); err != nil {
			t.Fatalf("after recovery: %v", err)
		}
	}
	if d := segmenttest.Duplicates(ids); d != 0 {
		t.Fatalf("%d duplicates", d)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("IDs not increasing across the outage: %d then %d", ids[i-1], ids[i])
		}
	}
	t.Logf("%s outage: %d IDs served from buffers after the stop, then %v; recovered; %d IDs in all, 0 duplicates",
		b.Kind.Name, served, firstErr, len(ids))
}
