package mysql_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/mysql"
	"github.com/idgen/idgen/store/storetest"
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
		{"mysql://u:p@n1:3311,n2,n3:3313/idgen", "n1:3311", "u", "idgen", true},
		{"mysql://u:p@n1:3311,,n3/idgen", "", "", "", false},
		{"mysql://u:p@db/idgen?pool_max_conns=32", "db:3306", "u", "idgen", true},
		{"mysql://u:p@db/idgen?pool_max_conns=0", "", "", "", false},
		{"mysql://u:p@db/idgen?pool_max_conns=", "", "", "", false},
		{"mysql://u:p@db/idgen?pool_max_conns=many", "", "", "", false},
	} {
		cfg, err := mysql.ParseDSN(tc.dsn)
		if (err == nil) != tc.ok {
			t.Errorf("ParseDSN(%q) err = %v, want ok=%v", tc.dsn, err, tc.ok)
			continue
		}
		if tc.ok && (cfg.Addr != tc.addr || cfg.User != tc.user || cfg.DBName != tc.db || !cfg.ParseTime || !cfg.ClientFoundRows) {
			t.Errorf("ParseDSN(%q) = %+v", tc.dsn, cfg)
		}
		// The pool's bound is idgen's, not a session variable the
		// server would refuse.
		if tc.ok && cfg.Params["pool_max_conns"] != "" {
			t.Errorf("ParseDSN(%q) passes pool_max_conns to the server", tc.dsn)
		}
	}
}

// A host list whose first server refuses connections: every connection
// goes to the next one.
func TestOpen_FallbackHost(t *testing.T) {
	srv := dbtest.Start(t, dbtest.MySQL)
	dsn := strings.Replace(srv.DSN, "@", "@127.0.0.1:1,", 1)
	ctx := context.Background()
	st, err := mysql.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("Open(%s): %v", dsn, err)
	}
	defer st.Close()
	if got := st.DB().Stats().MaxOpenConnections; got != 16 {
		t.Errorf("pool bound = %d, want the default 16", got)
	}
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	tag := segment.Tag{Name: "fallback", MaxID: 1, Step: 10}
	if err := st.CreateTag(ctx, tag); err != nil {
		t.Fatal(err)
	}
	r, err := st.Reserve(ctx, tag.Name, 10)
	if err != nil || r.End-r.Start != 10 {
		t.Fatalf("Reserve = %+v, %v", r, err)
	}

	if _, err := mysql.Open(ctx, "mysql://u:p@127.0.0.1:1,127.0.0.1:2/idgen"); err == nil ||
		!strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "127.0.0.1:2") {
		t.Errorf("Open with no server up: err = %v, want both hosts named", err)
	}
}
