package mysql_test

import (
	"context"
	"testing"

	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/mysql"
	"github.com/idgen/idgen/store/storetest"
)

// BenchmarkReserve: a reservation with the identity check (fenced) beside
// one without (today), on the same database.
func BenchmarkReserve(b *testing.B) {
	srv := dbtest.Start(b, dbtest.MySQL)
	ctx := context.Background()
	s, err := mysql.Open(ctx, srv.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx, nil); err != nil {
		b.Fatal(err)
	}
	storetest.BenchReserve(b, mysql.UnfencedForTest(s), s)
}
