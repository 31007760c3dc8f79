package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/internal/idembench"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/postgres"
	"github.com/idgen/idgen/store/storetest"
)

func TestIdempotency_Conformance(t *testing.T) {
	storetest.RunIdempotency(t, storetest.Migrated(t, dbtest.Postgres, postgres.Open).Idempotency())
}

func BenchmarkIdempotency(b *testing.B) {
	st := storetest.Migrated(b, dbtest.Postgres, postgres.Open)
	idembench.BenchIdempotency(b, st, st.Idempotency(), idemFloor(st))
}

// idemFloor is the floor of BenchmarkIdempotency: the placeholder's
// INSERT of a new key, run durably on the store's own pool.
func idemFloor(st *postgres.Store) func(ctx context.Context, key string) error {
	now := time.Now().UnixMilli()
	return func(ctx context.Context, key string) error {
		_, err := st.DB().ExecContext(ctx, `INSERT INTO idempotency_key (scope, idem_key, fingerprint, owner, body, locked_until, expires_at) VALUES ($1, $2, 'f', 'o', '', $3, $4) ON CONFLICT (scope, idem_key) DO NOTHING`, "floor", key, now, now+3_600_000)
		return err
	}
}

// sweepCounts records what the Keeper's sweeps report.
type sweepCounts struct{ n, live, expired int64 }

func (*sweepCounts) KeyStored()      {}
func (*sweepCounts) Replayed()       {}
func (*sweepCounts) Conflict(string) {}
func (s *sweepCounts) Swept(n int, live, expired int64, _ error) {
	s.n, s.live, s.expired = int64(n), live, expired
}

// A backlog of 30,000 expired keys is gone after the first sweep that
// follows their expiry, with the default batch and budget: a sweep goes
// on while its batches come back full. (It used to stop at 10 batches
// of 1,000 and leave 20,000 for later periods.)
func TestIdempotency_OneSweepDrainsABacklog(t *testing.T) {
	st := storetest.Migrated(t, dbtest.Postgres, postgres.Open)
	ctx := context.Background()
	// 30,000 keys of 1s, written in one statement a second after they
	// were stored: expired now, with no wait, and the test is about the
	// sweep.
	now := time.Now().Add(-1100 * time.Millisecond)
	if _, err := st.DB().ExecContext(ctx, `INSERT INTO idempotency_key (scope, idem_key, fingerprint, owner, status, content_type, body, locked_until, expires_at)
		SELECT 'bulk', 'k' || g, 'f', 'o', 200, 'application/json', '{}', $1, $2 FROM generate_series(1, 30000) AS g`,
		now.UnixMilli(), now.Add(time.Second).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	obs := &sweepCounts{}
	k, err := idempotency.New(st.Idempotency(), idempotency.Config{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	var rows int
	if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM idempotency_key`).Scan(&rows); err != nil || rows != 30000 {
		t.Fatalf("%d rows before the sweep (%v); want 30000", rows, err)
	}
	start := time.Now()
	n, err := k.Sweep(ctx)
	if err != nil || n != 30000 || obs.expired != 0 || obs.live != 0 {
		t.Fatalf("first sweep after expiry: %d deleted (%v), %d expired and %d live left; want 30000, 0, 0", n, err, obs.expired, obs.live)
	}
	if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM idempotency_key`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d rows after the sweep (%v); want 0", rows, err)
	}
	t.Logf("one sweep deleted 30,000 expired keys in %v", time.Since(start).Round(time.Millisecond))
}

// BenchmarkIdempotencyPool16 is BenchmarkIdempotency with a pool of 16
// connections (pool_max_conns=16) for both the store and the floor,
// as many as the benchmark's goroutines: the default pool (4 on 2
// cores) makes keyed requests queue for a connection that the floor's
// single INSERT holds only briefly.
func BenchmarkIdempotencyPool16(b *testing.B) {
	srv := dbtest.Start(b, dbtest.Postgres)
	dsn := srv.DSN
	if strings.Contains(dsn, "?") {
		dsn += "&pool_max_conns=16"
	} else {
		dsn += "?pool_max_conns=16"
	}
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(ctx, nil); err != nil {
		b.Fatal(err)
	}
	idembench.BenchIdempotency(b, st, st.Idempotency(), idemFloor(st))
}
