package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// pipeFixture is a pool of one connection, so that every transaction
// runs on the connection the one before left (unless it was destroyed),
// and a table with row 1 at v = 0.
func pipeFixture(t *testing.T) (poolDB, *pgxpool.Pool) {
	t.Helper()
	srv := dbtest.Start(t, dbtest.Postgres)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	other, err := pgxpool.New(ctx, srv.DSN) // the checks' own connections
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	for _, q := range []string{`DROP TABLE IF EXISTS pipe_tx`, `CREATE TABLE pipe_tx (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)`,
		`INSERT INTO pipe_tx VALUES (1, 0)`} {
		if _, err := other.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = other.Exec(context.Background(), `DROP TABLE IF EXISTS pipe_tx`) })
	return poolDB{pool}, other
}

// checkFree fails unless row 1 is unlocked (waiting for a connection the
// server is still ending), has v = want, and the pool's connection is
// idle outside any transaction.
func checkFree(t *testing.T, db poolDB, other *pgxpool.Pool, want int) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, other, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '10s'`); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, `SELECT v FROM pipe_tx WHERE id = 1 FOR UPDATE`).Scan(&v); err != nil {
			return err
		}
		if v != want {
			t.Errorf("v = %d, want %d", v, want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("row 1: %v", err)
	}
	c, err := db.q.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if s := c.Conn().PgConn().TxStatus(); s != 'I' {
		t.Fatalf("the pool's connection is in state %c", s)
	}
}

var errFn = errors.New("fn failed")

// The transaction's BEGIN goes with its first statement and, with
// ExecLast, its COMMIT with the last: on every path it either commits
// once or leaves nothing behind, as pgx.BeginFunc.
func TestPipeTx(t *testing.T) {
	db, other := pipeFixture(t)
	ctx := context.Background()
	lockRow := func(q sqlstore.Querier) error {
		var v int
		return q.QueryRow(ctx, `SELECT v FROM pipe_tx WHERE id = 1 FOR UPDATE`).Scan(&v)
	}
	bump := `UPDATE pipe_tx SET v = v + 1 WHERE id = 1`
	want := 0

	t.Run("commit", func(t *testing.T) {
		err := db.InTx(ctx, func(q sqlstore.Querier) error {
			if err := lockRow(q); err != nil {
				return err
			}
			_, err := q.Exec(ctx, bump)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want++
		checkFree(t, db, other, want)
	})
	t.Run("first statement is an Exec", func(t *testing.T) {
		err := db.InTx(ctx, func(q sqlstore.Querier) error {
			if n, err := q.Exec(ctx, bump); err != nil || n != 1 {
				return errors.Join(err, errors.New("not one row"))
			}
			return lockRow(q)
		})
		if err != nil {
			t.Fatal(err)
		}
		want++
		checkFree(t, db, other, want)
	})
	t.Run("no rows is an answer", func(t *testing.T) {
		err := db.InTx(ctx, func(q sqlstore.Querier) error {
			var v int
			if err := q.QueryRow(ctx, `SELECT v FROM pipe_tx WHERE id = 2 FOR UPDATE`).Scan(&v); !errors.Is(err, pgx.ErrNoRows) {
				return errors.Join(errors.New("want ErrNoRows"), err)
			}
			_, err := q.Exec(ctx, bump)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want++
		checkFree(t, db, other, want)
	})
	t.Run("fn fails", func(t *testing.T) {
		err := db.InTx(ctx, func(q sqlstore.Querier) error {
			if err := lockRow(q); err != nil {
				return err
			}
			if _, err := q.Exec(ctx, bump); err != nil {
				return err
			}
			return errFn
		})
		if !errors.Is(err, errFn) {
			t.Fatalf("err = %v", err)
		}
		checkFree(t, db, other, want)
	})
	t.Run("first statement fails, retryable", func(t *testing.T) {
		err := db.InTx(ctx, func(q sqlstore.Querier) error {
			var v int
			return q.QueryRow(ctx, `SELECT v / 0 FROM pipe_tx WHERE id = 1 FOR UPDATE`).Scan(&v)
		})
		if err == nil {
			t.Fatal("a failed first statement did not fail")
		}
		err = db.InTx(ctx, func(q sqlstore.Querier) error {
			_, err := q.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$`)
			return err
		})
		if !spelling.IsRetryable(err) {
			t.Fatalf("err = %v, want a retryable one", err)
		}
		checkFree(t, db, other, want)
	})
	t.Run("ExecLast commits once", func(t *testing.T) {
		err := db.InTx(ctx, func(q sqlstore.Querier) error {
			if err := lockRow(q); err != nil {
				return err
			}
			n, err := q.(sqlstore.LastExecer).ExecLast(ctx, bump)
			if err != nil || n != 1 {
				return errors.Join(err, errors.New("not one row"))
			}
			if _, err := q.Exec(ctx, bump); !errors.Is(err, errTxOver) {
				t.Errorf("a statement after ExecLast: %v", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want++
		checkFree(t, db, other, want)
	})
	t.Run("ExecLast alone", func(t *testing.T) {
		err := db.InTx(ctx, func(q sqlstore.Querier) error {
			_, err := q.(sqlstore.LastExecer).ExecLast(ctx, bump)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want++
		checkFree(t, db, other, want)
	})
	t.Run("ExecLast fails", func(t *testing.T) {
		err := db.InTx(ctx, func(q sqlstore.Querier) error {
			if err := lockRow(q); err != nil {
				return err
			}
			if _, err := q.Exec(ctx, bump); err != nil {
				return err
			}
			_, err := q.(sqlstore.LastExecer).ExecLast(ctx, `INSERT INTO pipe_tx VALUES (1, 0)`)
			return err
		})
		if !spelling.IsDuplicate(err) {
			t.Fatalf("err = %v, want a duplicate key", err)
		}
		checkFree(t, db, other, want)
		err = db.InTx(ctx, func(q sqlstore.Querier) error {
			if err := lockRow(q); err != nil {
				return err
			}
			_, err := q.(sqlstore.LastExecer).ExecLast(ctx, `DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = '40P01'; END $$`)
			return err
		})
		if !spelling.IsRetryable(err) {
			t.Fatalf("err = %v, want a retryable one", err)
		}
		checkFree(t, db, other, want)
	})
	t.Run("ExecLast after a swallowed error", func(t *testing.T) {
		err := db.InTx(ctx, func(q sqlstore.Querier) error {
			if err := lockRow(q); err != nil {
				return err
			}
			_, _ = q.Exec(ctx, `SELECT 1/0`)
			_, err := q.(sqlstore.LastExecer).ExecLast(ctx, bump)
			return err
		})
		if err == nil {
			t.Fatal("committed an aborted transaction")
		}
		checkFree(t, db, other, want)
	})
	t.Run("context cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := db.InTx(cctx, func(q sqlstore.Querier) error { return lockRow(q) })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		for _, last := range []bool{false, true} {
			cctx, cancel := context.WithCancel(ctx)
			err = db.InTx(cctx, func(q sqlstore.Querier) error {
				if err := lockRow(q); err != nil {
					return err
				}
				cancel()
				if last {
					_, err := q.(sqlstore.LastExecer).ExecLast(cctx, bump)
					return err
				}
				_, err := q.Exec(cctx, bump)
				return err
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("ExecLast %v: err = %v", last, err)
			}
			checkFree(t, db, other, want)
		}
	})
}
