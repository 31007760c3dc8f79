package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/internal/sqlstore"
	"github.com/idgen/idgen/store/storetest"
)

// BenchmarkReserve: a reservation with the identity check (fenced) beside
// one without (today), on the same database.
func BenchmarkReserve(b *testing.B) {
	srv := dbtest.Start(b, dbtest.Postgres)
	ctx := context.Background()
	s, err := Open(ctx, srv.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx, nil); err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, srv.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	sp := spelling
	sp.Identity = nil
	d, err := sqlstore.NewDialect(sp, sqlstore.IDSequence)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchReserve(b, sqlstore.New(poolDB{pool}, d), s)
}
