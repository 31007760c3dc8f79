package postgres_test

import (
	"context"
	"testing"

	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/postgres"
	"github.com/idgen/idgen/store/storetest"
)

func TestStore_Integration(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Kind: dbtest.Postgres,
		Open: func(ctx context.Context, dsn string) (storetest.Store, error) { return postgres.Open(ctx, dsn) },
	})
}
