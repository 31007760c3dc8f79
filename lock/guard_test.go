package lock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/store/dbtest"
	mysqlstore "github.com/idgen/idgen/store/mysql"
)

// guardDB is a real database the guard's tests run on.
type guardDB struct {
	name    string
	dialect lock.Dialect
	db      *sql.DB
	opts    *sql.TxOptions // for every transaction; nil: the default
}

// guardDBs opens every database the guard supports: SQLite always, and
// PostgreSQL and MariaDB/MySQL through dbtest, each in a schema of its
// own. MySQL runs twice, with and without clientFoundRows, because the
// two report an unchanged row's rows affected differently and the guard
// must not depend on either.
func guardDBs(t *testing.T) []guardDB {
	t.Helper()
	lite, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "guard.db")+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close() })
	dbs := []guardDB{{name: "sqlite", dialect: lock.SQLite, db: lite}}

	pg, err := sql.Open("pgx", dbtest.Start(t, dbtest.Postgres).DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	dbs = append(dbs, guardDB{name: "postgres", dialect: lock.Postgres, db: pg})

	my := dbtest.Start(t, dbtest.MySQL)
	for _, found := range []bool{true, false} {
		cfg, err := mysqlstore.ParseDSN(my.DSN)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ClientFoundRows = found
		conn, err := mysqldrv.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db := sql.OpenDB(conn)
		t.Cleanup(func() { _ = db.Close() })
		dbs = append(dbs, guardDB{name: fmt.Sprintf("mysql/clientFoundRows=%v", found), dialect: lock.MySQL, db: db})
	}
	return dbs
}

var dollar = regexp.MustCompile(`\$\d+`)

// q writes query, in PostgreSQL's placeholders, in d's.
func (d guardDB) q(query string) string {
	if d.dialect == lock.Postgres {
		return query
	}
	return dollar.ReplaceAllString(query, "?")
}

// guarded is one guard variant over an account table whose balance is
// the protected data: the side table keyed by "account:ID", or the
// account table's own fence_token column keyed by id.
type guarded struct {
	name  string
	g     *lock.Guard
	key   func(id int64) any
	token func(t *testing.T, id int64) int64 // the stored token, 0 if none
}

// setup creates the account table (once per database) and the two
// guard variants over it.
func setup(t *testing.T, d guardDB) []guarded {
	t.Helper()
	ctx := context.Background()
	if _, err := d.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS account
		(id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, fence_token BIGINT NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	side, err := lock.NewGuard(lock.GuardConfig{Dialect: d.dialect})
	if err != nil {
		t.Fatal(err)
	}
	if err := side.CreateTable(ctx, d.db); err != nil {
		t.Fatal(err)
	}
	col, err := lock.NewGuard(lock.GuardConfig{Dialect: d.dialect, Table: "account", Key: "id", Column: "fence_token"})
	if err != nil {
		t.Fatal(err)
	}
	stored := func(query string, key func(int64) any) func(*testing.T, int64) int64 {
		return func(t *testing.T, id int64) int64 {
			t.Helper()
			var tok int64
			err := d.db.QueryRowContext(ctx, d.q(query), key(id)).Scan(&tok)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				t.Fatal(err)
			}
			return tok
		}
	}
	sideKey := func(id int64) any { return fmt.Sprintf("account:%d", id) }
	colKey := func(id int64) any { return id }
	return []guarded{
		{"side", side, sideKey, stored(`SELECT token FROM lock_guard WHERE resource = $1`, sideKey)},
		{"column", col, colKey, stored(`SELECT fence_token FROM account WHERE id = $1`, colKey)},
	}
}

// newAccount inserts an account with balance 0 and no token, under an
// id no other case uses.
func newAccount(t *testing.T, d guardDB) int64 {
	t.Helper()
	nextID++
	if _, err := d.db.ExecContext(context.Background(), d.q(`INSERT INTO account (id, balance) VALUES ($1, 0)`), nextID); err != nil {
		t.Fatal(err)
	}
	return nextID
}

var nextID int64

func balance(t *testing.T, d guardDB, id int64) int64 {
	t.Helper()
	var b int64
	if err := d.db.QueryRowContext(context.Background(), d.q(`SELECT balance FROM account WHERE id = $1`), id).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// write is the documented pattern: begin, Check, write, then commit (or
// roll back, to test that path); a Check error rolls back. It reads the
// account first, as callers often do: under MySQL's REPEATABLE READ that
// fixes the transaction's snapshot before Check, so a guard that read
// the token without locking would see an old one.
func write(ctx context.Context, d guardDB, v guarded, id, token, bal int64, commit bool) error {
	tx, err := d.db.BeginTx(ctx, d.opts)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var old int64
	if err := tx.QueryRowContext(ctx, d.q(`SELECT balance FROM account WHERE id = $1`), id).Scan(&old); err != nil {
		return err
	}
	if err := v.g.Check(ctx, tx, v.key(id), token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, d.q(`UPDATE account SET balance = $1 WHERE id = $2`), bal, id); err != nil {
		return err
	}
	if !commit {
		return tx.Rollback()
	}
	return tx.Commit()
}

func TestGuard_Check(t *testing.T) {
	type step struct {
		token, balance int64
		commit         bool
		err            error
	}
	cases := []struct {
		name               string
		steps              []step
		wantToken, wantBal int64
	}{
		{"FirstTokenPasses", []step{{5, 100, true, nil}}, 5, 100},
		{"EqualTokenPasses", []step{{5, 100, true, nil}, {5, 200, true, nil}}, 5, 200},
		{"HigherTokenRaises", []step{{5, 100, true, nil}, {7, 200, true, nil}}, 7, 200},
		{"StaleTokenRefusedNothingWritten", []step{{7, 100, true, nil}, {6, 200, true, lock.ErrStaleToken}}, 7, 100},
		{"StaleAfterManyRefused", []step{{3, 1, true, nil}, {9, 2, true, nil}, {4, 3, true, lock.ErrStaleToken}, {8, 4, true, lock.ErrStaleToken}}, 9, 2},
		// 6 passes afterwards: the rolled-back 9 left no trace.
		{"RollbackLeavesTokenUnchanged", []step{{5, 100, true, nil}, {9, 200, false, nil}, {6, 300, true, nil}}, 6, 300},
	}
	for _, d := range guardDBs(t) {
		t.Run(d.name, func(t *testing.T) {
			for _, v := range setup(t, d) {
				t.Run(v.name, func(t *testing.T) {
					for _, c := range cases {
						t.Run(c.name, func(t *testing.T) {
							ctx := context.Background()
							id := newAccount(t, d)
							for i, s := range c.steps {
								if err := write(ctx, d, v, id, s.token, s.balance, s.commit); !errors.Is(err, s.err) || (s.err == nil) != (err == nil) {
									t.Fatalf("step %d, token %d: err %v, want %v", i, s.token, err, s.err)
								}
							}
							if got := v.token(t, id); got != c.wantToken {
								t.Errorf("stored token %d, want %d", got, c.wantToken)
							}
							if got := balance(t, d, id); got != c.wantBal {
								t.Errorf("balance %d, want %d", got, c.wantBal)
							}
						})
					}
				})
			}
		})
	}
}

func TestGuard_Check_Concurrent(t *testing.T) {
	cases := []struct {
		name        string
		first       int64
		firstCommit bool
		second      int64
		err         error // the second's
		want        int64 // the stored token at the end
	}{
		{"SixCommitsFirstFiveRefused", 6, true, 5, lock.ErrStaleToken, 6},
		{"FiveCommitsFirstSixRaises", 5, true, 6, nil, 6},
		{"SixRollsBackFivePasses", 6, false, 5, nil, 5},
		{"EqualTokensTakeTurns", 6, true, 6, nil, 6},
	}
	for _, d := range guardDBs(t) {
		t.Run(d.name, func(t *testing.T) {
			for _, v := range setup(t, d) {
				// Fresh: the resource has no token yet (the side table
				// inserts its row concurrently). Seeded: token 1 was
				// accepted before.
				for _, seeded := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/seeded=%v", v.name, seeded), func(t *testing.T) {
						for _, c := range cases {
							t.Run(c.name, func(t *testing.T) {
								ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
								defer cancel()
								id := newAccount(t, d)
								if seeded {
									if err := write(ctx, d, v, id, 1, 0, true); err != nil {
										t.Fatal(err)
									}
								}
								tx, err := d.db.BeginTx(ctx, nil)
								if err != nil {
									t.Fatal(err)
								}
								defer func() { _ = tx.Rollback() }()
								if err := v.g.Check(ctx, tx, v.key(id), c.first); err != nil {
									t.Fatalf("first Check: %v", err)
								}
								if _, err := tx.ExecContext(ctx, d.q(`UPDATE account SET balance = $1 WHERE id = $2`), c.first, id); err != nil {
									t.Fatal(err)
								}
								// The second transaction must wait for the
								// first's row lock (SQLite: its write lock),
								// not read around it.
								done := make(chan error, 1)
								go func() { done <- write(ctx, d, v, id, c.second, c.second, true) }()
								select {
								case err := <-done:
									t.Fatalf("the second transaction did not wait for the first: %v", err)
								case <-time.After(100 * time.Millisecond):
								}
								if c.firstCommit {
									err = tx.Commit()
								} else {
									err = tx.Rollback()
								}
								if err != nil {
									t.Fatal(err)
								}
								if err := <-done; !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
									t.Fatalf("second Check, token %d: err %v, want %v", c.second, err, c.err)
								}
								if got := v.token(t, id); got != c.want {
									t.Errorf("stored token %d, want %d", got, c.want)
								}
								if got := balance(t, d, id); got != c.want {
									t.Errorf("balance %d, want the write of token %d", got, c.want)
								}
							})
						}
					})
				}
			}
		})
	}
}

// weakerDBs are the databases under settings where a waiting Check may
// fail instead of waiting and then deciding: PostgreSQL under REPEATABLE
// READ and SERIALIZABLE (a serialization failure), MySQL under READ
// COMMITTED and SERIALIZABLE, and SQLite with deferred transactions
// (SQLITE_BUSY), the settings docs/locks.md tells callers to retry under.
func weakerDBs(t *testing.T) []guardDB {
	t.Helper()
	lite, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "guard.db")+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close() })
	var pg, my *sql.DB
	for _, d := range guardDBs(t) {
		switch d.name {
		case "postgres":
			pg = d.db
		case "mysql/clientFoundRows=true":
			my = d.db
		}
	}
	iso := func(l sql.IsolationLevel) *sql.TxOptions { return &sql.TxOptions{Isolation: l} }
	return []guardDB{
		{name: "sqlite/deferred", dialect: lock.SQLite, db: lite},
		{name: "postgres/repeatable-read", dialect: lock.Postgres, db: pg, opts: iso(sql.LevelRepeatableRead)},
		{name: "postgres/serializable", dialect: lock.Postgres, db: pg, opts: iso(sql.LevelSerializable)},
		{name: "mysql/read-committed", dialect: lock.MySQL, db: my, opts: iso(sql.LevelReadCommitted)},
		{name: "mysql/serializable", dialect: lock.MySQL, db: my, opts: iso(sql.LevelSerializable)},
	}
}

// lockWait reports whether another transaction in d's schema
// (PostgreSQL) or database (MySQL) waits for a lock. PostgreSQL shows
// the wait itself. MariaDB's innodb_trx does not list a transaction
// that began with a plain read, so there it is a locking statement of
// another connection in flight: under SERIALIZABLE any (its reads lock
// too), otherwise one past the first read of the balance. SQLite shows
// none: a deferred transaction fails at once rather than wait.
func (d guardDB) lockWait(ctx context.Context) bool {
	var query string
	switch d.dialect {
	case lock.Postgres: // a backend that reads the account table waits
		query = `SELECT count(*) FROM pg_locks w JOIN pg_locks r ON r.pid = w.pid
			WHERE NOT w.granted AND r.locktype = 'relation' AND r.relation = to_regclass('account')`
	case lock.MySQL:
		query = `SELECT count(*) FROM information_schema.processlist
			WHERE db = DATABASE() AND id <> CONNECTION_ID() AND command IN ('Query', 'Execute')`
		if d.opts == nil || d.opts.Isolation != sql.LevelSerializable {
			query += ` AND info NOT LIKE 'SELECT balance%'`
		}
	default:
		return false
	}
	var n int
	return d.db.QueryRowContext(ctx, query).Scan(&n) == nil && n > 0
}

// retryable reports the errors after which the caller retries the whole
// transaction: nothing was decided.
func retryable(err error) bool {
	var pe *pgconn.PgError
	var me *mysqldrv.MySQLError
	var se *sqlite.Error
	switch {
	case errors.As(err, &pe):
		return pe.Code == "40001" || pe.Code == "40P01"
	case errors.As(err, &me):
		return me.Number == 1213 || me.Number == 1205
	case errors.As(err, &se):
		return se.Code()&0xff == 5 // SQLITE_BUSY and its extended codes
	}
	return false
}

// TestGuard_Check_Concurrent_WeakerSettings runs the concurrent cases
// where the second transaction may fail with a retryable error instead
// of waiting: then one retry must reach the same outcome. A stale token
// must never pass, retry or not.
func TestGuard_Check_Concurrent_WeakerSettings(t *testing.T) {
	cases := []struct {
		name        string
		first       int64
		firstCommit bool
		second      int64
		err         error
		want        int64
	}{
		{"SixCommitsFirstFiveRefused", 6, true, 5, lock.ErrStaleToken, 6},
		{"FiveCommitsFirstSixRaises", 5, true, 6, nil, 6},
		{"SixRollsBackFivePasses", 6, false, 5, nil, 5},
	}
	for _, d := range weakerDBs(t) {
		t.Run(d.name, func(t *testing.T) {
			for _, v := range setup(t, d) {
				t.Run(v.name, func(t *testing.T) {
					for _, c := range cases {
						t.Run(c.name, func(t *testing.T) {
							ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
							defer cancel()
							id := newAccount(t, d)
							tx, err := d.db.BeginTx(ctx, d.opts)
							if err != nil {
								t.Fatal(err)
							}
							defer func() { _ = tx.Rollback() }()
							if err := v.g.Check(ctx, tx, v.key(id), c.first); err != nil {
								t.Fatalf("first Check: %v", err)
							}
							if _, err := tx.ExecContext(ctx, d.q(`UPDATE account SET balance = $1 WHERE id = $2`), c.first, id); err != nil {
								t.Fatal(err)
							}
							done := make(chan error, 1)
							go func() { done <- write(ctx, d, v, id, c.second, c.second, true) }()
							// The second waits for the first's lock, or
							// failed at once (SQLite's SQLITE_BUSY).
							var second error
							finished := false
							waitFor(t, "the second transaction waits for the first's lock or failed", func() bool {
								select {
								case second = <-done:
									finished = true
									return true
								default:
									return d.lockWait(ctx)
								}
							})
							if c.firstCommit {
								err = tx.Commit()
							} else {
								err = tx.Rollback()
							}
							if err != nil {
								t.Fatal(err)
							}
							if !finished {
								second = <-done
							}
							err = second
							if retryable(err) {
								t.Logf("retried after: %v", err)
								err = write(ctx, d, v, id, c.second, c.second, true)
							}
							if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
								t.Fatalf("second Check, token %d: err %v, want %v", c.second, err, c.err)
							}
							if got := v.token(t, id); got != c.want {
								t.Errorf("stored token %d, want %d", got, c.want)
							}
							if got := balance(t, d, id); got != c.want {
								t.Errorf("balance %d, want the write of token %d", got, c.want)
							}
						})
					}
				})
			}
		})
	}
}

func TestGuard_Check_ColumnMissingRow(t *testing.T) {
	for _, d := range guardDBs(t) {
		t.Run(d.name, func(t *testing.T) {
			v := setup(t, d)[1]
			tx, err := d.db.BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if err := v.g.Check(context.Background(), tx, int64(-1), 5); !errors.Is(err, sql.ErrNoRows) {
				t.Fatalf("err %v, want sql.ErrNoRows", err)
			}
		})
	}
}

func TestGuard_Check_RefusesBadArguments(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "guard.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g, err := lock.NewGuard(lock.GuardConfig{Dialect: lock.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := g.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	cases := []struct {
		name  string
		tx    *sql.Tx
		key   any
		token int64
		err   error // nil: any error
	}{
		{"NilTx", nil, "r", 1, nil},
		{"ZeroToken", tx, "r", 0, nil},
		{"NegativeToken", tx, "r", -3, nil},
		{"EmptyResource", tx, "", 1, lock.ErrInvalidName},
		{"ResourceNotAString", tx, 42, 1, lock.ErrInvalidName},
		{"ResourceTooLong", tx, string(make([]byte, lock.MaxNameLen+1)), 1, lock.ErrInvalidName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := g.Check(ctx, c.tx, c.key, c.token)
			if err == nil || (c.err != nil && !errors.Is(err, c.err)) {
				t.Fatalf("err %v, want %v", err, c.err)
			}
			if errors.Is(err, lock.ErrStaleToken) {
				t.Fatalf("err %v: a bad argument is not a stale token", err)
			}
		})
	}
}

func TestNewGuard_RefusesBadConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		c    lock.GuardConfig
	}{
		{"NoDialect", lock.GuardConfig{}},
		{"UnknownDialect", lock.GuardConfig{Dialect: "oracle"}},
		{"KeyWithoutColumn", lock.GuardConfig{Dialect: lock.Postgres, Table: "t", Key: "id"}},
		{"ColumnWithoutKey", lock.GuardConfig{Dialect: lock.Postgres, Table: "t", Column: "fence_token"}},
		{"ColumnWithoutTable", lock.GuardConfig{Dialect: lock.Postgres, Key: "id", Column: "fence_token"}},
		{"KeyIsColumn", lock.GuardConfig{Dialect: lock.Postgres, Table: "t", Key: "id", Column: "id"}},
		{"InjectedTable", lock.GuardConfig{Dialect: lock.MySQL, Table: "t; DROP TABLE t"}},
		{"QuotedTable", lock.GuardConfig{Dialect: lock.Postgres, Table: `"T"`}},
		{"ThreePartTable", lock.GuardConfig{Dialect: lock.Postgres, Table: "a.b.c"}},
		{"BadColumn", lock.GuardConfig{Dialect: lock.SQLite, Table: "t", Key: "id", Column: "fence-token"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if g, err := lock.NewGuard(c.c); !errors.Is(err, lock.ErrInvalidGuardConfig) {
				t.Fatalf("NewGuard(%+v) = %v, %v; want ErrInvalidGuardConfig", c.c, g, err)
			}
		})
	}
	for _, c := range []lock.GuardConfig{
		{Dialect: lock.Postgres},
		{Dialect: lock.MySQL, Table: "app.fences"},
		{Dialect: lock.SQLite, Table: "account", Key: "id", Column: "fence_token"},
	} {
		if _, err := lock.NewGuard(c); err != nil {
			t.Errorf("NewGuard(%+v): %v", c, err)
		}
	}
	col, _ := lock.NewGuard(lock.GuardConfig{Dialect: lock.SQLite, Table: "account", Key: "id", Column: "fence_token"})
	if err := col.CreateTable(context.Background(), nil); !errors.Is(err, lock.ErrInvalidGuardConfig) {
		t.Errorf("CreateTable of the column variant: %v, want ErrInvalidGuardConfig", err)
	}
}
