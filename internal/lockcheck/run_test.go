package lockcheck

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/dbtest"
	_ "github.com/idgen/idgen/store/mysql"
	_ "github.com/idgen/idgen/store/postgres"
	_ "github.com/idgen/idgen/store/sqlite"
)

// The run's shape. Three workers keep one lock busy; a hold is three
// writes 100 ms apart, so faults find a holder between two writes.
const (
	workers  = 3
	leaseTTL = time.Second
)

// backend is a lock store a run checks.
type backend struct {
	name string
	dsn  string // the lock store's
	// failover, if set, changes the lock store's history under the
	// fleet once (an async failover, a file put back) and returns what
	// happened in words.
	failover func(t *testing.T, f *fleet) (string, error)
	// ttl is the leases' TTL; zero means leaseTTL.
	ttl time.Duration
	// measured makes the lock's own violations (a token backwards or
	// granted twice, a lease lost silently) figures to report rather than
	// failures: for a store that does not promise them through its
	// fault. The guard's (a stale write accepted, interleaved writes)
	// fail the run on every store.
	measured bool
}

// runLength is how long a run goes on injecting faults, after the
// minimum of each (IDGEN_LOCKCHECK_SECONDS).
func runLength(t *testing.T) time.Duration {
	v := os.Getenv("IDGEN_LOCKCHECK_SECONDS")
	if v == "" {
		return 10 * time.Second
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("IDGEN_LOCKCHECK_SECONDS=%q: want a whole number of seconds", v)
	}
	return time.Duration(n) * time.Second
}

// noGuard is IDGEN_LOCKCHECK_NOGUARD=1: the workers write without the
// guard's check, and the run must find violations.
func noGuard() bool { return os.Getenv("IDGEN_LOCKCHECK_NOGUARD") == "1" }

// resource gives the run a guarded resource on a PostgreSQL of its own
// (a schema on the shared server, or a container), apart from the lock
// store, so that it survives the lock store's faults.
func resource(t *testing.T) (dsn string, db *sql.DB) {
	t.Helper()
	dsn = dbtest.Start(t, dbtest.Postgres).DSN
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	g, err := lock.NewGuard(lock.GuardConfig{Dialect: lock.Postgres})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := g.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, LogDDL); err != nil {
		t.Fatal(err)
	}
	return dsn, db
}

// migrate creates the lock store's tables.
func migrate(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// workerBin builds the worker program once per run of go test.
func workerBin(t *testing.T) string {
	t.Helper()
	return proctest.Program(t, t.TempDir(), "./internal/lockcheck/worker")
}

// readLog reads the resource's log.
func readLog(t *testing.T, db *sql.DB) []Row {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT id, worker, owner, hold, token FROM "+LogTable+" ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.ID, &r.Worker, &r.Owner, &r.Hold, &r.Token); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// run checks b: workers on b's lock store write to a guarded resource
// while holders are paused past their TTL and killed (at least 3 of
// each) and, if b has one, the store fails over once; then the verifier
// reads what happened. It fails the test on a violation (or, under
// IDGEN_LOCKCHECK_NOGUARD=1, on none) and returns the counts.
func run(t *testing.T, b backend) Counts {
	t.Helper()
	began := time.Now()
	resDSN, db := resource(t)
	if b.ttl == 0 {
		b.ttl = leaseTTL
	}
	if !strings.HasPrefix(b.dsn, "redis://") && !strings.HasPrefix(b.dsn, "etcd://") {
		migrate(t, b.dsn)
	}
	args := []string{"-lock", b.dsn, "-resource", resDSN, "-ttl", b.ttl.String(), "-gap", "100ms"}
	if noGuard() {
		args = append(args, "-no-guard")
	}
	f := newFleet(t, workerBin(t), 3, args...)
	for i := range workers {
		f.start(fmt.Sprintf("w%d", i+1))
	}
	n := &nemesis{f: f, ttl: b.ttl, oneWriter: strings.HasPrefix(b.dsn, "sqlite://")}
	var notes []string
	step := func(i int) {
		if i%2 == 0 {
			if err := n.pause(); err != nil {
				t.Fatalf("%v\n%s", err, f.stderrs())
			}
		} else {
			n.kill()
		}
	}
	i := 0
	for ; i < 4; i++ {
		step(i)
	}
	if b.failover != nil {
		before := f.grantCount()
		what, err := b.failover(t, f)
		if err != nil {
			t.Fatalf("%s: %v\n%s", b.name, err, f.stderrs())
		}
		n.counts.Failovers++
		notes = append(notes, what)
		// The workers must get going again on the new history.
		after := f.grantCount()
		if err := f.waitGrants(after, workers, 60*time.Second); err != nil {
			t.Fatalf("after the failover: %v\n%s", err, f.stderrs())
		}
		f.mu.Lock()
		var top int64
		for _, g := range f.grants[:before] {
			top = max(top, g.Token)
		}
		notes = append(notes, fmt.Sprintf("tokens: the highest granted before the fault %d, the first granted after it %d", top, f.grants[after].Token))
		f.mu.Unlock()
	}
	for deadline := time.Now().Add(runLength(t)); i < 6 || time.Now().Before(deadline); i++ {
		step(i)
	}
	f.stop()
	c, v := Verify(f.history(readLog(t, db)))
	c.Pauses, c.Kills, c.Failovers = n.counts.Pauses, n.counts.Kills, n.counts.Failovers
	if n.blocked > 0 {
		notes = append(notes, fmt.Sprintf("%d pauses let go after %v: the stopped worker held the file's write lock", n.blocked, blockedAfter))
	}
	t.Logf("%s: %s; %v", b.name, c, time.Since(began).Round(time.Second))
	for _, s := range notes {
		t.Logf("%s: %s", b.name, s)
	}
	switch {
	case noGuard() && len(v) == 0:
		t.Errorf("%s without the guard: no violation found; the checker cannot see a missing guard", b.name)
	case noGuard():
		t.Logf("%s without the guard: %d violations, as it must; the first: %s", b.name, len(v), v[0])
	default:
		if len(v) > 0 {
			t.Logf("the workers' events:\n%s", trace(f.history(nil), v))
		}
		failed := 0
		for _, s := range v {
			if b.measured && !guardViolation(s) {
				t.Logf("%s: measured, not asserted: %s", b.name, s)
				continue
			}
			if failed++; failed <= 20 {
				t.Errorf("violation: %s", s)
			}
		}
		if failed > 20 {
			t.Errorf("… and %d more", failed-20)
		}
	}
	if c.Grants == 0 || c.Writes == 0 {
		t.Errorf("%s: %d grants, %d writes: the run did nothing\n%s", b.name, c.Grants, c.Writes, f.stderrs())
	}
	return c
}

// trace renders the events of the owners that violations name, for a
// failing run's message.
func trace(h History, violations []string) string {
	var b strings.Builder
	for _, o := range slices.Sorted(maps.Keys(h.Events)) {
		if !slices.ContainsFunc(violations, func(v string) bool { return strings.Contains(v, o) }) {
			continue
		}
		fmt.Fprintf(&b, "--- %s\n", o)
		for _, e := range h.Events[o] {
			fmt.Fprintf(&b, "  %s hold %d token %d floor %d id %d %s %s\n", e.Kind, e.Hold, e.Token, e.Floor, e.ID, e.Reason, e.Err)
		}
	}
	return b.String()
}

// guardViolation reports whether Verify's violation v is the guard's:
// a write the resource should have refused, or a log that disagrees
// with what the workers were told.
func guardViolation(v string) bool {
	for _, p := range []string{"stale write accepted", "two holders", "interleaved writes"} {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return strings.Contains(v, "committed as log row")
}

// skipShort skips t under -short, before it starts any server.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("real worker processes and servers: skipped under -short")
	}
}
