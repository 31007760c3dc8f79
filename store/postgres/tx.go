package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idgen/idgen/store/internal/sqlstore"
)

// pipeTx is a transaction on one of the pool's connections that saves
// two round trips by pipelining (pgx.Batch): BEGIN goes out with the
// transaction's first statement, and a caller that knows its last
// statement sends it with the COMMIT (ExecLast). Otherwise it is
// pgx.BeginFunc's transaction: rolled back on any error, including a
// cancelled context, and a connection left inside a transaction (a
// failed rollback, a lost connection) is destroyed on release, not
// reused.
type pipeTx struct {
	c    *pgx.Conn
	tx   pgx.Tx // nil until BEGIN was sent
	over bool   // ExecLast committed or rolled back: nothing more may run
}

var _ sqlstore.LastExecer = (*pipeTx)(nil)

// errTxOver is a statement after ExecLast: a bug in the caller.
var errTxOver = errors.New("postgres: statement after the transaction's last one")

// pipeInTx is InTx on a pool.
func pipeInTx(ctx context.Context, p *pgxpool.Pool, fn func(q sqlstore.Querier) error) (err error) {
	c, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	// Release destroys a connection that is not idle outside a
	// transaction, so a panic in fn cannot leave one open either.
	defer c.Release()
	t := &pipeTx{c: c.Conn()}
	err = fn(t)
	switch {
	case t.over || t.tx == nil:
		// Committed or rolled back by ExecLast, or nothing was sent.
		return err
	case err != nil:
		_ = t.tx.Rollback(ctx) // a failed rollback closes the connection
		return err
	}
	return t.tx.Commit(ctx)
}

// begin sends BEGIN and query in one batch, the transaction's first
// statement, whose results the caller reads after BEGIN's.
func (t *pipeTx) begin(ctx context.Context, query string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(query, args...)
	br := t.c.SendBatch(ctx, b)
	t.tx = br.Tx()
	return br
}

// first returns the error of the first of errs that is not nil.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *pipeTx) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	switch {
	case t.over:
		return errRow{errTxOver}
	case t.tx != nil:
		return t.tx.QueryRow(ctx, query, args...)
	}
	return &batchRow{br: t.begin(ctx, query, args)}
}

// batchRow is the row of a transaction's first statement: BEGIN's
// result is read first, and the batch is closed after the scan, so the
// connection is free for the next statement.
type batchRow struct{ br pgx.BatchResults }

func (r *batchRow) Scan(dest ...any) error {
	if _, err := r.br.Exec(); err != nil {
		return first(r.br.Close(), err)
	}
	err := r.br.QueryRow().Scan(dest...)
	// The scan's own error first: ErrNoRows is an answer, not a failure.
	return first(err, r.br.Close())
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (t *pipeTx) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	if t.over {
		return nil, errTxOver
	}
	if t.tx == nil {
		// Rows would hold the batch open; a transaction that starts
		// with them pays BEGIN's round trip.
		tx, err := t.c.Begin(ctx)
		if err != nil {
			return nil, err
		}
		t.tx = tx
	}
	return t.tx.Query(ctx, query, args...) //nolint:sqlclosecheck // the caller closes the rows
}

func (t *pipeTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	switch {
	case t.over:
		return 0, errTxOver
	case t.tx != nil:
		tag, err := t.tx.Exec(ctx, query, args...)
		return tag.RowsAffected(), err
	}
	br := t.begin(ctx, query, args)
	if _, err := br.Exec(); err != nil {
		return 0, first(br.Close(), err)
	}
	tag, err := br.Exec()
	return tag.RowsAffected(), first(err, br.Close())
}

// ExecLast implements sqlstore.LastExecer: query and COMMIT in one
// batch. A failed query makes the server skip the COMMIT (a pipeline
// stops at its first error), and the transaction is rolled back here.
func (t *pipeTx) ExecLast(ctx context.Context, query string, args ...any) (int64, error) {
	if t.over {
		return 0, errTxOver
	}
	t.over = true
	if t.tx == nil {
		// A transaction of one statement: autocommit is the same.
		tag, err := t.c.Exec(ctx, query, args...)
		return tag.RowsAffected(), err
	}
	b := &pgx.Batch{}
	b.Queue(query, args...)
	b.Queue("commit")
	br := t.tx.SendBatch(ctx, b)
	tag, err := br.Exec()
	commit, cerr := br.Exec()
	err = first(err, cerr, br.Close())
	if err == nil && commit.String() != "COMMIT" {
		err = pgx.ErrTxCommitRollback // an earlier statement had failed
	}
	if err != nil {
		// Not committed, or a lost connection: roll back whatever is
		// still open; a failed rollback closes the connection, which
		// the release then destroys, as pgx's own Commit does.
		if t.c.PgConn().TxStatus() != 'I' {
			_ = t.tx.Rollback(ctx)
		}
		return 0, err
	}
	return tag.RowsAffected(), nil
}
