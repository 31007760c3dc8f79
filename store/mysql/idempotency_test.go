package mysql_test

import (
	"context"
	"testing"

	"github.com/idgen/idgen/internal/dbtest"
	"github.com/idgen/idgen/internal/storetest"
	"github.com/idgen/idgen/store/mysql"
)

func TestIdempotency_Conformance(t *testing.T) {
	srv := dbtest.Start(t, dbtest.MySQL)
	ctx := context.Background()
	st, err := mysql.Open(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	storetest.RunIdempotency(t, st.Idempotency())
}

func BenchmarkIdempotency(b *testing.B) {
	srv := dbtest.Start(b, dbtest.MySQL)
	ctx := context.Background()
	st, err := mysql.Open(ctx, srv.DSN)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(ctx, nil); err != nil {
		b.Fatal(err)
	}
	storetest.BenchIdempotency(b, st, st.Idempotency())
}
