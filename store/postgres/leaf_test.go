package postgres_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"

	"github.com/idgen/idgen/internal/dbtest"
	"github.com/idgen/idgen/internal/sqlstore"
	"github.com/idgen/idgen/internal/storetest"
	"github.com/idgen/idgen/store/postgres"
)

func TestStore_SharedLeafAlloc(t *testing.T) {
	storetest.RunLeafAlloc(t, storetest.LeafBackend{
		Kind: dbtest.Postgres,
		Open: func(ctx context.Context, dsn string) (storetest.Store, error) {
			return postgres.OpenTable(ctx, dsn, sqlstore.LeafAlloc)
		},
		SQL: func(dsn string) (*sql.DB, error) { return sql.Open("pgx", dsn) },
		Rebind: func(q string) string {
			var b strings.Builder
			n := 0
			for _, r := range q {
				if r == '?' {
					n++
					b.WriteString("$" + strconv.Itoa(n))
					continue
				}
				b.WriteRune(r)
			}
			return b.String()
		},
		// Leaf's scripts/leaf_alloc.sql in PostgreSQL's words.
		CreateTable: `CREATE TABLE leaf_alloc (
  biz_tag     varchar(128) NOT NULL DEFAULT '' PRIMARY KEY,
  max_id      bigint       NOT NULL DEFAULT 1,
  step        integer      NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time timestamp    NOT NULL DEFAULT CURRENT_TIMESTAMP
)`,
		WaitingNow: func(ctx context.Context, db *sql.DB) (int64, error) {
			var n int64
			err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_locks WHERE NOT granted`).Scan(&n)
			return n, err
		},
	})
}
