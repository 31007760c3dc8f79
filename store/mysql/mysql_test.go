package mysql_test

import (
	"context"
	"testing"

	"github.com/idgen/idgen/internal/dbtest"
	"github.com/idgen/idgen/internal/storetest"
	"github.com/idgen/idgen/store/mysql"
)

func TestStore_Integration(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Kind: dbtest.MySQL,
		Open: func(ctx context.Context, dsn string) (storetest.Store, error) { return mysql.Open(ctx, dsn) },
	})
}

func TestParseDSN(t *testing.T) {
	for _, tc := range []struct {
		dsn, addr, user, db string
		ok                  bool
	}{
		{"mysql://u:p@db:3306/idgen", "db:3306", "u", "idgen", true},
		{"mysql://u:p@db/idgen", "db:3306", "u", "idgen", true},
		{"postgres://u:p@db/idgen", "", "", "", false},
		{"mysql://", "", "", "", false},
	} {
		cfg, err := mysql.ParseDSN(tc.dsn)
		if (err == nil) != tc.ok {
			t.Errorf("ParseDSN(%q) err = %v, want ok=%v", tc.dsn, err, tc.ok)
			continue
		}
		if tc.ok && (cfg.Addr != tc.addr || cfg.User != tc.user || cfg.DBName != tc.db || !cfg.ParseTime || !cfg.ClientFoundRows) {
			t.Errorf("ParseDSN(%q) = %+v", tc.dsn, cfg)
		}
	}
}
