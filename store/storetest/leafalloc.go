package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/dbtest"
)

// Leaf's own statements, as its IDAllocMapper runs them (MyBatis, JDBC
// placeholders): a fixed-step or a custom-step UPDATE, then the SELECT,
// in one transaction.
const (
	leafUpdateFixed  = `UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = ?`
	leafUpdateCustom = `UPDATE leaf_alloc SET max_id = max_id + ? WHERE biz_tag = ?`
	leafSelect       = `SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ?`
)

// waitFactor sets the line between a reservation that waited for the row
// lock and one that did not: the median time of the same statement (for
// Leaf, its UPDATE) or call (for idgen, Reserve) with no contention,
// measured first, times waitFactor.
const waitFactor = 3

// LeafBackend is how RunLeafAlloc reaches Leaf's leaf_alloc table on one
// kind of database.
type LeafBackend struct {
	Kind dbtest.Kind
	// Open opens an idgen store that reserves from leaf_alloc.
	Open func(ctx context.Context, dsn string) (Store, error)
	// SQL opens a database/sql pool, as a Leaf server's JDBC pool.
	SQL func(dsn string) (*sql.DB, error)
	// LeafDSN, if set, marks the DSN of the Leaf side's pools, so the
	// server's records can tell them from idgen's.
	LeafDSN func(dsn string) string
	// Rebind turns the JDBC ? placeholders into the database's own.
	Rebind func(q string) string
	// CreateTable is leaf_alloc's DDL, as Leaf's scripts/leaf_alloc.sql.
	CreateTable string
	// CurrentSchema is the SQL expression that names the schema (MySQL:
	// the database) the connection works in, so that checks of
	// information_schema see this test's tables only.
	CurrentSchema string
	// RowLockWaits, if set, reads the server's cumulative count of row
	// lock waits, an exact figure next to the timing one.
	RowLockWaits func(ctx context.Context, db *sql.DB) (int64, error)
	// WaitingNow, if set, counts sessions waiting for a lock right now;
	// it is sampled during the run.
	WaitingNow func(ctx context.Context, db *sql.DB) (int64, error)
	// LockWaitLog, if set, makes the server log every lock wait, before
	// the run, and returns a function that counts, after it, the waits
	// of Leaf's UPDATE and of idgen's SELECT … FOR UPDATE that the server
	// logged; ok is false where the log cannot be read.
	LockWaitLog func(ctx context.Context, t *testing.T, srv *dbtest.Server, admin *sql.DB) func() (leaf, idgen int64, ok bool)
}

// span is a range [start, end) a Leaf server reserved.
type span struct{ start, end int64 }

// RunLeafAlloc runs Leaf's exact reservation SQL from several "Leaf
// servers" (own pools, fixed and custom step) concurrently with several
// idgen allocators reserving from the same leaf_alloc row, and asserts
// that no ID is handed out twice. It also checks that idgen's migrations
// create no sequence table of their own beside leaf_alloc.
func RunLeafAlloc(t *testing.T, b LeafBackend) {
	ctx := context.Background()
	// A server of its own, even where the tests share one
	// (IDGEN_TEST_*_DSN): the lock waits it counts are the server's.
	srv := dbtest.StartContainer(t, b.Kind)
	admin, err := b.SQL(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `DROP TABLE IF EXISTS leaf_alloc`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(ctx, b.CreateTable); err != nil {
		t.Fatal(err)
	}
	const tag, start, step = "leaf-orders", 1, 10
	if _, err := admin.ExecContext(ctx, b.Rebind(`INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)`),
		tag, start, step, "shared with Leaf"); err != nil {
		t.Fatal(err)
	}

	idg := make([]Store, 4)
	for i := range idg {
		s, err := b.Open(ctx, srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Migrate(ctx, nil); err != nil {
			t.Fatalf("migrate beside leaf_alloc: %v", err)
		}
		idg[i] = s
	}
	var own int
	if err := admin.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'id_sequence' AND table_schema = `+b.CurrentSchema).Scan(&own); err != nil {
		t.Fatal(err)
	}
	if own != 0 {
		t.Fatalf("idgen created its own id_sequence beside leaf_alloc")
	}

	t.Run("WorkerRange", func(t *testing.T) { RunWorkerRange(t, idg[0].Leases()) })

	// Uncontended baselines, on a tag of their own.
	const baseTag = "leaf-baseline"
	if _, err := admin.ExecContext(ctx, b.Rebind(`INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)`),
		baseTag, 1, step, "baseline"); err != nil {
		t.Fatal(err)
	}
	var leafBase, idgenBase []time.Duration
	for range 40 {
		_, d, err := leafReserve(ctx, admin, b.Rebind, baseTag, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		leafBase = append(leafBase, d)
		began := time.Now()
		if _, err := idg[0].Reserve(ctx, baseTag, 0); err != nil {
			t.Fatal(err)
		}
		idgenBase = append(idgenBase, time.Since(began))
	}
	leafLine, idgenLine := waitFactor*median(leafBase), waitFactor*median(idgenBase)

	var waitsBefore int64
	if b.RowLockWaits != nil {
		if waitsBefore, err = b.RowLockWaits(ctx, admin); err != nil {
			t.Fatal(err)
		}
	}
	var countLogged func() (int64, int64, bool)
	if b.LockWaitLog != nil {
		countLogged = b.LockWaitLog(ctx, t, srv, admin)
	}
	samplerCtx, stopSampler := context.WithCancel(ctx)
	var sampled, waitingSeen atomic.Int64
	var samplerDone sync.WaitGroup
	if b.WaitingNow != nil {
		samplerDone.Go(func() {
			for samplerCtx.Err() == nil {
				if n, err := b.WaitingNow(samplerCtx, admin); err == nil {
					sampled.Add(1)
					if n > 0 {
						waitingSeen.Add(1)
					}
				}
				time.Sleep(time.Millisecond)
			}
		})
	}

	const leafServers, leafRounds = 4, 150
	const idgenWorkers, idgenEach = 4, 1500
	var mu sync.Mutex
	var spans []span
	var idgenIDs []int64
	var leafWaited, idgenWaited, idgenLoads atomic.Int64
	var leafWorst atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()

	leafDSN := srv.DSN
	if b.LeafDSN != nil {
		leafDSN = b.LeafDSN(leafDSN)
	}
	for i := range leafServers {
		db, err := b.SQL(leafDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		wg.Go(func() {
			for r := range leafRounds {
				custom := r%2 == 1 // Leaf's dynamic step uses the custom-step statement
				s, took, err := leafReserve(ctx, db, b.Rebind, tag, custom, int64(step*(1+i)))
				if err != nil {
					t.Errorf("leaf server %d: %v", i, err)
					return
				}
				if took > leafLine {
					leafWaited.Add(1)
				}
				if int64(took) > leafWorst.Load() {
					leafWorst.Store(int64(took))
				}
				mu.Lock()
				spans = append(spans, s)
				mu.Unlock()
			}
		})
	}
	for i, s := range idg {
		obs := &latencyObserver{line: idgenLine, slow: &idgenWaited, loads: &idgenLoads}
		a, err := segment.New(s, segment.Options{FixedStep: true, Observer: obs, WaitTimeout: 30 * time.Second, LoadTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer a.Close()
			var inner sync.WaitGroup
			for range idgenWorkers {
				inner.Go(func() {
					ids := make([]int64, 0, idgenEach)
					for range idgenEach {
						id, err := a.Next(ctx, tag)
						if err != nil {
							t.Errorf("idgen instance %d: %v", i, err)
							return
						}
						ids = append(ids, id)
					}
					mu.Lock()
					idgenIDs = append(idgenIDs, ids...)
					mu.Unlock()
				})
			}
			inner.Wait()
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	stopSampler()
	samplerDone.Wait()
	if t.Failed() {
		return
	}

	// Every ID a Leaf server reserved counts as issued by it.
	owner := make(map[int64]bool, len(idgenIDs)+leafServers*leafRounds*step*4)
	var leafIDs int64
	dups := 0
	for _, s := range spans {
		for id := s.start; id < s.end; id++ {
			if _, ok := owner[id]; ok {
				dups++
			}
			owner[id] = true
			leafIDs++
		}
	}
	for _, id := range idgenIDs {
		if _, ok := owner[id]; ok {
			dups++
		}
		owner[id] = false
	}
	if dups != 0 {
		t.Fatalf("%d duplicate IDs between Leaf's SQL and idgen on one leaf_alloc row", dups)
	}
	if len(idgenIDs) != len(idg)*idgenWorkers*idgenEach {
		t.Fatalf("idgen issued %d IDs, want %d", len(idgenIDs), len(idg)*idgenWorkers*idgenEach)
	}
	var maxID int64
	if err := admin.QueryRowContext(ctx, b.Rebind(leafSelect), tag).Scan(new(string), &maxID, new(int64)); err != nil {
		t.Fatal(err)
	}
	for id := range owner {
		if id < start || id >= maxID {
			t.Fatalf("ID %d outside the row's reserved span [%d, %d)", id, start, maxID)
		}
	}
	exact := "n/a"
	if b.RowLockWaits != nil {
		after, err := b.RowLockWaits(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		exact = fmt.Sprint(after - waitsBefore)
	}
	sample := "n/a"
	if b.WaitingNow != nil {
		sample = fmt.Sprintf("%d of %d samples", waitingSeen.Load(), sampled.Load())
	}
	t.Logf("%s shared leaf_alloc: %d Leaf reservations (%d IDs) by %d Leaf connections, %d idgen reservations (%d IDs issued) by %d idgen instances, in %v; 0 duplicates; final max_id %d",
		b.Kind.Name, len(spans), leafIDs, leafServers, idgenLoads.Load(), len(idgenIDs), len(idg), elapsed.Round(time.Millisecond), maxID)
	logged := "n/a"
	if countLogged != nil {
		if l, i, ok := countLogged(); ok {
			logged = fmt.Sprintf("Leaf %d, idgen %d", l, i)
		}
	}
	t.Logf("%s reservations with a lock wait the server logged (waits of 1ms or more): %s", b.Kind.Name, logged)
	t.Logf("%s row-lock waits: Leaf UPDATEs slower than %dx uncontended (%v): %d of %d (slowest %v); idgen reservations slower than %dx uncontended (%v): %d of %d; server's row-lock wait counter: %s; sampler saw sessions waiting: %s",
		b.Kind.Name, waitFactor, leafLine.Round(time.Microsecond), leafWaited.Load(), len(spans), time.Duration(leafWorst.Load()).Round(time.Microsecond),
		waitFactor, idgenLine.Round(time.Microsecond), idgenWaited.Load(), idgenLoads.Load(), exact, sample)
}

// leafReserve is one reservation as a Leaf server makes it, and reports
// how long its UPDATE, the statement that takes the row lock, took.
func leafReserve(ctx context.Context, db *sql.DB, rebind func(string) string, tag string, custom bool, customStep int64) (span, time.Duration, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return span{}, 0, err
	}
	defer func() { _ = tx.Rollback() }()
	began := time.Now()
	if custom {
		_, err = tx.ExecContext(ctx, rebind(leafUpdateCustom), customStep, tag)
	} else {
		_, err = tx.ExecContext(ctx, rebind(leafUpdateFixed), tag)
	}
	if err != nil {
		return span{}, 0, err
	}
	took := time.Since(began)
	var key string
	var maxID, step int64
	if err := tx.QueryRowContext(ctx, rebind(leafSelect), tag).Scan(&key, &maxID, &step); err != nil {
		return span{}, 0, err
	}
	if err := tx.Commit(); err != nil {
		return span{}, 0, err
	}
	// Leaf's segment: [max_id - step, max_id), with the step it asked for.
	if custom {
		step = customStep
	}
	return span{start: maxID - step, end: maxID}, took, nil
}

// latencyObserver counts idgen's reservations and those slower than line.
type latencyObserver struct {
	line        time.Duration
	slow, loads *atomic.Int64
}

func (o *latencyObserver) WaitedForLoad(string) {}
func (o *latencyObserver) SegmentLoaded(_ string, _ int64, latency time.Duration, err error) {
	if err != nil {
		return
	}
	o.loads.Add(1)
	if latency > o.line {
		o.slow.Add(1)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
