package dbtest

import (
	"database/sql"
	"testing"
)

func TestWithPostgresParam(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u:p@h:5432/db?sslmode=disable", "postgres://u:p@h:5432/db?search_path=s1&sslmode=disable"},
		{"postgresql://u@h/db", "postgresql://u@h/db?search_path=s1"},
		{"host=h user=u dbname=db", "host=h user=u dbname=db search_path=s1"},
	} {
		got, err := withPostgresParam(tc.dsn, "search_path", "s1")
		if err != nil || got != tc.want {
			t.Errorf("withPostgresParam(%q) = %q, %v; want %q", tc.dsn, got, err, tc.want)
		}
	}
	if _, err := withPostgresParam("postgres://u@h:x:y/db", "search_path", "s1"); err == nil {
		t.Error("a URL pgx cannot read: no error")
	}
}

// With an existing server, each Start gets a schema or database of its
// own, so that tests do not see each other's tables.
func TestStart_ExternalIsolates(t *testing.T) {
	for _, k := range []Kind{Postgres, MySQL} {
		t.Run(k.Name, func(t *testing.T) {
			if !External(k) {
				t.Skipf("set %s to run against an existing server", k.dsnEnv)
			}
			// The same table made through each: the second CREATE fails
			// if both reach one schema.
			for i := range 2 {
				dsn, err := sqlDSN(k, Start(t, k).DSN)
				if err != nil {
					t.Fatal(err)
				}
				db, err := sql.Open(k.driver, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if _, err := db.Exec("CREATE TABLE probe (x int)"); err != nil {
					t.Fatalf("Start %d: %v", i, err)
				}
			}
		})
	}
}
