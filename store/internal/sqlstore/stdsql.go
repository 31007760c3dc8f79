package sqlstore

import (
	"context"
	"database/sql"
)

// StdDB adapts a database/sql pool to DB.
type StdDB struct{ DB *sql.DB }

type stdQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type stdQ struct{ q stdQuerier }

func (s stdQ) QueryRow(ctx context.Context, query string, args ...any) Row {
	return s.q.QueryRowContext(ctx, query, args...)
}

func (s stdQ) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := s.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return stdRows{rows}, nil
}

func (s stdQ) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

type stdRows struct{ *sql.Rows }

func (r stdRows) Close() { _ = r.Rows.Close() }

// QueryRow implements Querier.
func (s StdDB) QueryRow(ctx context.Context, query string, args ...any) Row {
	return stdQ{s.DB}.QueryRow(ctx, query, args...)
}

// Query implements Querier.
func (s StdDB) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	return stdQ{s.DB}.Query(ctx, query, args...)
}

// Exec implements Querier.
func (s StdDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return stdQ{s.DB}.Exec(ctx, query, args...)
}

// InTx implements DB. database/sql rolls the transaction back by itself
// when ctx is cancelled; the deferred Rollback covers every other exit.
func (s StdDB) InTx(ctx context.Context, fn func(q Querier) error) error {
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(stdQ{tx}); err != nil {
		return err
	}
	return tx.Commit()
}
