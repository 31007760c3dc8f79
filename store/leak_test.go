package store_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/mysql"
	"github.com/idgen/idgen/store/postgres"
	"github.com/idgen/idgen/store/sqlite"
)

// closer is what the leak test uses of a store.
type closer interface {
	Migrate(ctx context.Context, logger *slog.Logger) (int64, error)
	DB() *sql.DB
	Idempotency() idempotency.Store
	Leases() snowflake.LeaseTable
	Close() error
}

// Opening and closing a store of each kind 100 times, using every pool
// it has (DB, Idempotency, Leases), leaves no goroutine behind: each
// Close ends what its Open started. The servers start first, so that
// their clients' goroutines are part of the baseline.
func TestOpenClose_NoLeak(t *testing.T) {
	const rounds = 100
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idgen.db")
	type opener struct {
		name string
		dsn  string
		open func(ctx context.Context, dsn string) (closer, error)
	}
	openers := []opener{
		{"sqlite", "sqlite://" + path, func(ctx context.Context, dsn string) (closer, error) { return sqlite.Open(ctx, dsn) }},
		{"postgres", dbtest.Start(t, dbtest.Postgres).DSN, func(ctx context.Context, dsn string) (closer, error) { return postgres.Open(ctx, dsn) }},
		{"mysql", dbtest.Start(t, dbtest.MySQL).DSN, func(ctx context.Context, dsn string) (closer, error) { return mysql.Open(ctx, dsn) }},
	}
	for _, o := range openers {
		st, err := o.open(ctx, o.dsn)
		if err != nil {
			t.Fatalf("%s: open: %v", o.name, err)
		}
		if _, err := st.Migrate(ctx, nil); err != nil {
			t.Fatalf("%s: migrate: %v", o.name, err)
		}
		if err := st.Close(); err != nil {
			t.Fatalf("%s: close: %v", o.name, err)
		}
	}
	baseline := goleak.IgnoreCurrent()
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			for i := range rounds {
				st, err := o.open(ctx, o.dsn)
				if err != nil {
					t.Fatalf("round %d: open: %v", i, err)
				}
				if err := st.DB().PingContext(ctx); err != nil {
					t.Fatalf("round %d: DB: %v", i, err)
				}
				if _, _, err := st.Idempotency().Get(ctx, "leak", "key"); err != nil {
					t.Fatalf("round %d: idempotency: %v", i, err)
				}
				if _, err := st.Leases().Workers(ctx); err != nil {
					t.Fatalf("round %d: leases: %v", i, err)
				}
				if err := st.Close(); err != nil {
					t.Fatalf("round %d: close: %v", i, err)
				}
			}
			goleak.VerifyNone(t, baseline)
		})
	}
}
