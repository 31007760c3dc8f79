package dedup_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/idempotency/dedup"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/mysql"
	"github.com/idgen/idgen/store/postgres"
	"github.com/idgen/idgen/store/sqlite"
	"github.com/idgen/idgen/store/storetest"
)

// backend is one SQL store the tests run on, with what the tests
// write beside the records in its own SQL.
type backend struct {
	name string
	open func(t *testing.T) *store.Store
	// insertEffect is the business write of a handler, keyed by message.
	insertEffect string
	// waiting counts the sessions waiting for a row lock; empty where
	// the wait is for the whole database (SQLite's BEGIN IMMEDIATE).
	waiting string
}

func backends() []backend {
	return []backend{
		{name: "sqlite", open: func(t *testing.T) *store.Store {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "dedup.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			if _, err := st.Migrate(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			return st
		}, insertEffect: `INSERT INTO dedup_effect (msg) VALUES (?)`},
		{name: "postgres", open: func(t *testing.T) *store.Store {
			return storetest.Migrated(t, dbtest.Postgres, postgres.Open)
		}, insertEffect: `INSERT INTO dedup_effect (msg) VALUES ($1)`,
			waiting: `SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`},
		{name: "mariadb", open: func(t *testing.T) *store.Store {
			return storetest.Migrated(t, dbtest.MySQL, mysql.Open)
		}, insertEffect: `INSERT INTO dedup_effect (msg) VALUES (?)`,
			// innodb_trx needs the PROCESS privilege; a user sees its own
			// sessions in the process list, where an insert that runs
			// for more than a moment waits on a lock.
			waiting: `SELECT COUNT(*) FROM information_schema.processlist
			WHERE id <> CONNECTION_ID() AND info LIKE 'INSERT IGNORE INTO idgen_dedup%'`},
	}
}

// rig is one backend's store, with an effect table whose rows count
// the handlers' committed runs.
type rig struct {
	backend
	st *store.Store
	db *sql.DB
}

func newRig(t *testing.T, b backend) *rig {
	st := b.open(t)
	db := st.DB()
	// No unique key on msg: a handler that ran twice must show as two
	// rows, not be hidden by a constraint.
	if _, err := db.ExecContext(context.Background(), `CREATE TABLE dedup_effect (msg VARCHAR(255) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &rig{backend: b, st: st, db: db}
}

func (r *rig) effects(t *testing.T, msg string) int {
	t.Helper()
	q := `SELECT COUNT(*) FROM dedup_effect WHERE msg = ?`
	if r.name == "postgres" {
		q = strings.Replace(q, "?", "$1", 1)
	}
	var n int
	if err := r.db.QueryRowContext(context.Background(), q, msg).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// delivery is one delivery of a message: Do in a transaction of its
// own, committed when Do returns nil and rolled back otherwise, as a
// consumer does.
func (r *rig) delivery(ctx context.Context, d *dedup.Deduper, group, msg string, fail error) (ran bool, err error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	err = d.Do(ctx, tx, group, msg, func(ctx context.Context) error {
		ran = true
		if _, err := tx.ExecContext(ctx, r.insertEffect, group+"/"+msg); err != nil {
			return err
		}
		return fail
	})
	if err != nil {
		_ = tx.Rollback()
		return ran, err
	}
	return ran, tx.Commit()
}

var errHandler = errors.New("handler failed")

func TestDeduper_Do_SQL(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, b)
			d, err := dedup.New(r.st.Dedup(), dedup.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Run("Sequential", func(t *testing.T) { testSequential(t, r, d) })
			t.Run("DuplicateWaits", func(t *testing.T) { testDuplicateWaits(t, r, d) })
			t.Run("Sweep", func(t *testing.T) { testSweep(t, r) })
		})
	}
}

// testSequential delivers each case's message once per entry of fails
// (nil: the handler succeeds), one after the other.
func testSequential(t *testing.T, r *rig, d *dedup.Deduper) {
	cases := []struct {
		name     string
		fails    []error
		wantErrs []error
		wantRuns int // handler calls
		want     int // committed effects
	}{
		{name: "once", fails: []error{nil}, wantErrs: []error{nil}, wantRuns: 1, want: 1},
		{name: "redelivered after success is skipped", fails: []error{nil, nil, nil},
			wantErrs: []error{nil, dedup.ErrProcessed, dedup.ErrProcessed}, wantRuns: 1, want: 1},
		{name: "failed handler leaves no record, redelivery runs", fails: []error{errHandler, nil, nil},
			wantErrs: []error{errHandler, nil, dedup.ErrProcessed}, wantRuns: 2, want: 1},
		{name: "fails every time, never recorded", fails: []error{errHandler, errHandler},
			wantErrs: []error{errHandler, errHandler}, wantRuns: 2, want: 0},
	}
	ctx := context.Background()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := fmt.Sprintf("seq-%d", i)
			runs := 0
			for j, fail := range c.fails {
				ran, err := r.delivery(ctx, d, "g", msg, fail)
				if ran {
					runs++
				}
				if !errors.Is(err, c.wantErrs[j]) || (err != nil && c.wantErrs[j] == nil) {
					t.Fatalf("delivery %d: err %v, want %v", j, err, c.wantErrs[j])
				}
			}
			if runs != c.wantRuns {
				t.Errorf("handler ran %d times, want %d", runs, c.wantRuns)
			}
			if got := r.effects(t, "g/"+msg); got != c.want {
				t.Errorf("%d effects committed, want %d", got, c.want)
			}
		})
	}
	t.Run("groups are apart", func(t *testing.T) {
		for _, g := range []string{"billing", "shipping"} {
			if _, err := r.delivery(ctx, d, g, "same-key", nil); err != nil {
				t.Fatalf("group %s: %v", g, err)
			}
		}
	})
	t.Run("keys compare byte for byte", func(t *testing.T) {
		for _, k := range []string{"Key", "key", "key ", "ключ"} {
			if _, err := r.delivery(ctx, d, "bytes", k, nil); err != nil {
				t.Fatalf("key %q: %v", k, err)
			}
		}
	})
}

// testDuplicateWaits runs a duplicate while the first delivery's
// transaction is open: it waits, and gets ErrProcessed if the first
// commits, or runs if the first rolls back.
func testDuplicateWaits(t *testing.T, r *rig, d *dedup.Deduper) {
	cases := []struct {
		name      string
		commit    bool
		wantErr   error
		wantRan   bool
		wantCount int
	}{
		{name: "first commits", commit: true, wantErr: dedup.ErrProcessed, wantCount: 1},
		{name: "first rolls back", commit: false, wantRan: true, wantCount: 1},
	}
	ctx := context.Background()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := fmt.Sprintf("wait-%d", i)
			tx, err := r.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if err := d.Do(ctx, tx, "g", msg, func(ctx context.Context) error {
				_, err := tx.ExecContext(ctx, r.insertEffect, "g/"+msg)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var started atomic.Bool
			type result struct {
				ran bool
				err error
			}
			second := make(chan result, 1)
			go func() {
				started.Store(true)
				ran, err := r.delivery(ctx, d, "g", msg, nil)
				second <- result{ran, err}
			}()
			if err := testtime.WaitFor(10*time.Second, 5*time.Millisecond, func() error {
				if !started.Load() {
					return errors.New("the duplicate has not started")
				}
				if r.waiting == "" {
					return nil
				}
				var n int
				if err := r.db.QueryRowContext(ctx, r.waiting).Scan(&n); err != nil {
					return err
				}
				if n == 0 {
					return errors.New("the duplicate does not wait on a lock")
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			select {
			case res := <-second:
				t.Fatalf("the duplicate returned while the first was in flight: ran %v, err %v", res.ran, res.err)
			default:
			}
			if c.commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			res := <-second
			if !errors.Is(res.err, c.wantErr) || (res.err != nil && c.wantErr == nil) {
				t.Fatalf("duplicate: err %v, want %v", res.err, c.wantErr)
			}
			if res.ran != c.wantRan {
				t.Errorf("duplicate ran %v, want %v", res.ran, c.wantRan)
			}
			if got := r.effects(t, "g/"+msg); got != c.wantCount {
				t.Errorf("%d effects committed, want %d", got, c.wantCount)
			}
		})
	}
}

// testSweep checks that records go after their retention, and that a
// message whose record was swept runs again.
func testSweep(t *testing.T, r *rig) {
	ctx := context.Background()
	clock := testtime.New(time.Now().Add(-time.Hour))
	d, err := dedup.New(r.st.Dedup(), dedup.Config{Retention: time.Minute, SweepBatch: 2, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := r.delivery(ctx, d, "sweep", fmt.Sprint(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	n, err := d.Sweep(ctx)
	if err != nil || n != 0 {
		t.Fatalf("sweep within the retention: %d, %v; want 0, nil", n, err)
	}
	clock.Advance(time.Minute)
	// Batches of 2: the sweep goes on while they come back full. Other
	// tests' records, kept a week from now, stay.
	if n, err = d.Sweep(ctx); err != nil || n != 5 {
		t.Fatalf("sweep after the retention: %d, %v; want 5, nil", n, err)
	}
	if _, err := r.delivery(ctx, d, "g", "seq-0", nil); !errors.Is(err, dedup.ErrProcessed) {
		t.Fatalf("another test's record: %v, want ErrProcessed", err)
	}
	ran, err := r.delivery(ctx, d, "sweep", "0", nil)
	if err != nil || !ran {
		t.Fatalf("a swept message: ran %v, err %v; want it run", ran, err)
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		group, key string
		want       error
	}{
		{"g", "k", nil},
		{strings.Repeat("g", dedup.MaxGroupLen), strings.Repeat("k", dedup.MaxKeyLen), nil},
		{"", "k", dedup.ErrInvalidGroup},
		{strings.Repeat("g", dedup.MaxGroupLen+1), "k", dedup.ErrInvalidGroup},
		{"g\x00", "k", dedup.ErrInvalidGroup},
		{"g", "", dedup.ErrInvalidKey},
		{"g", strings.Repeat("k", dedup.MaxKeyLen+1), dedup.ErrInvalidKey},
		{"g", "\xff", dedup.ErrInvalidKey},
		{"g", "a\x00b", dedup.ErrInvalidKey},
	}
	for _, c := range cases {
		err := dedup.Check(c.group, c.key)
		if !errors.Is(err, c.want) || (err != nil && c.want == nil) {
			t.Errorf("Check(%q, %q) = %v, want %v", c.group, c.key, err, c.want)
		}
	}
}

// Do refuses a bad group or key before it touches the transaction.
func TestDeduper_Do_InvalidBeforeIO(t *testing.T) {
	d, err := dedup.New(nopStore{}, dedup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Do(context.Background(), nil, "", "k", func(context.Context) error {
		t.Fatal("handler ran")
		return nil
	})
	if !errors.Is(err, dedup.ErrInvalidGroup) {
		t.Fatalf("err %v, want ErrInvalidGroup", err)
	}
}

func TestNew_Config(t *testing.T) {
	cases := []struct {
		name string
		st   dedup.Store
		cfg  dedup.Config
		ok   bool
	}{
		{"defaults", nopStore{}, dedup.Config{}, true},
		{"no store", nil, dedup.Config{}, false},
		{"retention under 1s", nopStore{}, dedup.Config{Retention: time.Millisecond}, false},
		{"negative retention", nopStore{}, dedup.Config{Retention: -time.Hour}, false},
		{"sweep under 1s", nopStore{}, dedup.Config{SweepEvery: time.Millisecond}, false},
		{"negative batch", nopStore{}, dedup.Config{SweepBatch: -1}, false},
	}
	for _, c := range cases {
		_, err := dedup.New(c.st, c.cfg)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// nopStore is a Store for tests that never reach it.
type nopStore struct{}

func (nopStore) Mark(context.Context, dedup.Tx, string, string, time.Time) (bool, error) {
	return false, errors.New("nopStore")
}
func (nopStore) Sweep(context.Context, time.Time, int) (int, error) { return 0, nil }
