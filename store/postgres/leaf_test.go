package postgres_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/postgres"
	"github.com/idgen/idgen/store/storetest"
)

func TestStore_SharedLeafAlloc(t *testing.T) {
	storetest.RunLeafAlloc(t, storetest.LeafBackend{
		Kind: dbtest.Postgres,
		Open: func(ctx context.Context, dsn string) (storetest.Store, error) {
			return postgres.OpenTable(ctx, dsn, "leaf_alloc")
		},
		SQL: func(dsn string) (*sql.DB, error) { return sql.Open("pgx", dsn) },
		LeafDSN: func(dsn string) string {
			if strings.Contains(dsn, "?") {
				return dsn + "&application_name=" + leafApp
			}
			return dsn + "?application_name=" + leafApp
		},
		CurrentSchema: "current_schema()",
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
		LockWaitLog: logLockWaits,
		WaitingNow: func(ctx context.Context, db *sql.DB) (int64, error) {
			var n int64
			err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_locks WHERE NOT granted`).Scan(&n)
			return n, err
		},
	})
}

// logLockWaits turns on log_lock_waits with a 1ms deadlock_timeout, so
// that PostgreSQL logs every lock wait of 1ms or more, with the session's
// application_name ("leaf" on the Leaf side's connections) and virtual
// transaction ID in front. A reservation that waited is a transaction
// with at least one such line. It needs the test's own container, whose
// log it reads.
func logLockWaits(ctx context.Context, t *testing.T, srv *dbtest.Server, admin *sql.DB) func() (int64, int64, bool) {
	if srv.Container() == nil {
		return func() (int64, int64, bool) { return 0, 0, false }
	}
	for _, q := range []string{`ALTER SYSTEM SET log_lock_waits = on`, `ALTER SYSTEM SET deadlock_timeout = '1ms'`,
		`ALTER SYSTEM SET log_line_prefix = '%m app=%a vxid=%v '`, `SELECT pg_reload_conf()`} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	waitRE := regexp.MustCompile(`app=(\S*) vxid=(\S+) LOG:  process \d+ still waiting for`)
	// count reads the log so far, and whether marker is in it.
	count := func(marker string) (leaf, idgen map[string]bool, seen bool) {
		leaf, idgen = map[string]bool{}, map[string]bool{}
		r, err := srv.Container().Logs(ctx)
		if err != nil {
			t.Fatalf("container log: %v", err)
		}
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			m := waitRE.FindStringSubmatch(sc.Text())
			switch {
			case marker != "" && strings.Contains(sc.Text(), marker):
				seen = true
			case m == nil:
			case m[1] == leafApp:
				leaf[m[2]] = true
			default:
				idgen[m[2]] = true
			}
		}
		return leaf, idgen, seen
	}
	leaf0, idgen0, _ := count("")
	return func() (int64, int64, bool) {
		// The log reaches the container's asynchronously: a line logged
		// after the workload ended follows every wait it logged.
		marker := fmt.Sprintf("idgen-test-log-mark-%d", time.Now().UnixNano())
		if _, err := admin.ExecContext(ctx, `DO $$ BEGIN RAISE LOG '`+marker+`'; END $$`); err != nil {
			t.Fatalf("log a mark: %v", err)
		}
		var leaf, idgen map[string]bool
		if !testtime.Until(30*time.Second, 50*time.Millisecond, func() bool {
			var seen bool
			leaf, idgen, seen = count(marker)
			return seen
		}) {
			t.Fatalf("the mark %s never reached the container log", marker)
		}
		return int64(len(leaf) - len(leaf0)), int64(len(idgen) - len(idgen0)), true
	}
}

const leafApp = "leaf"
