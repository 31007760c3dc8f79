package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/idembench"
	"github.com/idgen/idgen/store/sqlite"
	"github.com/idgen/idgen/store/storetest"
)

func TestIdempotency_Conformance(t *testing.T) {
	t.Parallel()
	storetest.RunIdempotency(t, open(t, filepath.Join(t.TempDir(), "idgen.db")).Idempotency())
}

func BenchmarkIdempotency(b *testing.B) {
	st := open(b, filepath.Join(b.TempDir(), "idgen.db"))
	idembench.BenchIdempotency(b, st, st.Idempotency(), idemFloor(st))
}

// idemFloor is the floor of BenchmarkIdempotency: the placeholder's
// INSERT of a new key, run durably on the store's own pool.
func idemFloor(st *sqlite.Store) func(ctx context.Context, key string) error {
	now := time.Now().UnixMilli()
	return func(ctx context.Context, key string) error {
		_, err := st.DB().ExecContext(ctx, `INSERT INTO idempotency_key (scope, idem_key, fingerprint, owner, body, locked_until, expires_at) VALUES (?, ?, 'f', 'o', '', ?, ?) ON CONFLICT (scope, idem_key) DO NOTHING`, "floor", key, now, now+3_600_000)
		return err
	}
}
