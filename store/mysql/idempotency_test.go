package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/idembench"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/mysql"
	"github.com/idgen/idgen/store/storetest"
)

func TestIdempotency_Conformance(t *testing.T) {
	storetest.RunIdempotency(t, storetest.Migrated(t, dbtest.MySQL, mysql.Open).Idempotency())
}

func BenchmarkIdempotency(b *testing.B) {
	st := storetest.Migrated(b, dbtest.MySQL, mysql.Open)
	idembench.BenchIdempotency(b, st, st.Idempotency(), idemFloor(st))
}

// idemFloor is the floor of BenchmarkIdempotency: the placeholder's
// INSERT of a new key, run durably on the store's own pool.
func idemFloor(st *mysql.Store) func(ctx context.Context, key string) error {
	now := time.Now().UnixMilli()
	return func(ctx context.Context, key string) error {
		_, err := st.DB().ExecContext(ctx, `INSERT IGNORE INTO idempotency_key (scope, idem_key, fingerprint, owner, body, locked_until, expires_at) VALUES (?, ?, 'f', 'o', '', ?, ?)`, "floor", key, now, now+3_600_000)
		return err
	}
}
