// Package postgres is idgen's PostgreSQL backend, for several instances
// sharing one database. It uses a pgxpool, which reconnects by itself
// after the server restarts or a connection drops.
//
// A reservation is one short transaction: SELECT … FOR UPDATE on the
// tag's row, UPDATE, COMMIT; BEGIN goes out with the first statement
// (pipeTx), and a lock grant's COMMIT with its write. The transaction
// is rolled back on any error or cancelled context, so no row lock
// outlives a failed call. The same SQL runs on engines that speak the
// PostgreSQL protocol and support row locks, such as CockroachDB and
// YugabyteDB.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idgen/idgen/migrations"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// spelling is PostgreSQL's way of writing idgen's SQL.
var spelling = sqlstore.Spelling{
	Numbered: true, ForUpdate: " FOR UPDATE", SkipLocked: " FOR UPDATE SKIP LOCKED",
	Now: "now()", Greatest: "GREATEST", Int: "INTEGER",
	// SKIP LOCKED lets two instances sweep at once without waiting for
	// each other's batches.
	IdemSweep: `DELETE FROM idempotency_key WHERE (scope, idem_key) IN
		(SELECT scope, idem_key FROM idempotency_key WHERE expires_at <= ? LIMIT ? FOR UPDATE SKIP LOCKED)`,
	DedupSweep: `DELETE FROM idgen_dedup WHERE (dedup_group, message_key) IN
		(SELECT dedup_group, message_key FROM idgen_dedup WHERE expires_at <= ? LIMIT ? FOR UPDATE SKIP LOCKED)`,
	// Lock releases wake waiters through LISTEN/NOTIFY (see listen).
	Notify:      `SELECT pg_notify('idgen_lock', ?)`,
	WritingWith: true,
	NoRows:      pgx.ErrNoRows,
	IsDuplicate: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "23505"
	},
	IsRetryable: func(err error) bool {
		var pe *pgconn.PgError
		// deadlock_detected, serialization_failure
		return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
	},
	// The store's history on PostgreSQL: the cluster's
	// system_identifier, the same on a primary and its physical replicas
	// (read once per connection, see connSystem); the timeline, which a
	// promotion or a point-in-time recovery moves on; and the WAL
	// position, which only a restore takes back. Every function here is
	// executable by any role: no superuser, no pg_monitor.
	Identity: &sqlstore.ServerIdentity{
		Kind:       fence.Postgres,
		Server:     `'', substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8), pg_current_wal_lsn()::text, ''`,
		ConnSystem: connSystem,
		Tables: `SELECT c.relname::text FROM pg_class c WHERE c.relkind IN ('r', 'p') AND c.relname IN ('id_sequence', 'leaf_alloc')
		AND pg_table_is_visible(c.oid) ORDER BY 1`,
	},
}

// systemKey is where a connection keeps its server's system_identifier.
const systemKey = "idgen.system_identifier"

// connSystem returns the system_identifier of the server q's connection
// is on. pg_control_system() reads the control file from disk, which
// cost more than the rest of the identity check together; a connection
// stays on one server for its life, so it is read once per connection
// and kept with it (pgconn's CustomData). A promotion on the same
// connection moves the timeline, which is still read every time.
func connSystem(ctx context.Context, q sqlstore.Querier) (string, error) {
	var data map[string]any
	switch t := q.(type) {
	case txQ:
		data = t.q.Conn().PgConn().CustomData()
	case *pipeTx:
		data = t.c.PgConn().CustomData()
	}
	if id, ok := data[systemKey].(string); ok {
		return id, nil
	}
	var id string
	if err := q.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&id); err != nil {
		return "", err
	}
	if data != nil {
		data[systemKey] = id
	}
	return id, nil
}

// Store is the store over PostgreSQL; see package store.
type Store = store.Store

// Open connects to the database named by dsn, a postgres:// or
// postgresql:// URL or a key=value string as pgx accepts. It checks the
// connection once; it does not create the schema (call Migrate).
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenTable(ctx, dsn, store.IDSequence)
}

// OpenTable is Open with segments reserved from the named table,
// store.IDSequence or store.LeafAlloc (see store.Options).
func OpenTable(ctx context.Context, dsn, table string) (*Store, error) {
	return store.Open(ctx, dsn, store.Options{Driver: "postgres", Table: table})
}

// libpqKeys are the keywords that start PostgreSQL's key=value DSN form.
var libpqKeys = map[string]bool{"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true,
	"password": true, "passfile": true, "sslmode": true, "connect_timeout": true, "application_name": true,
	"options": true, "service": true, "target_session_attrs": true, "sslrootcert": true, "sslcert": true, "sslkey": true}

// isKeyValue reports whether dsn is in PostgreSQL's key=value form: its
// first word is a libpq keyword followed by =.
func isKeyValue(dsn string) bool {
	key, _, ok := strings.Cut(strings.TrimSpace(dsn), "=")
	return ok && libpqKeys[strings.TrimSpace(key)]
}

// check accepts every DSN: pgx parses it at Open.
func check(string) error { return nil }

func init() {
	sqlstore.Register(sqlstore.Driver{Name: "postgres", Schemes: []string{"postgres", "postgresql"},
		Bare: func(dsn string) (bool, error) { return isKeyValue(dsn), nil }, Check: check, Open: open})
}

// open connects the pool, and the database/sql view of it that
// migrations and tools use, opened once and closed with it.
func open(ctx context.Context, dsn string) (*sqlstore.Conn, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, parseError(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect to %s: %w", cfg.ConnConfig.Host, err)
	}
	view := stdlib.OpenDBFromPool(pool)
	return &sqlstore.Conn{DB: poolDB{pool}, SQL: view, Spelling: spelling,
		Migrations: migrations.Postgres, OpenIdem: func() (sqlstore.DB, sqlstore.DB, func()) { return openIdem(pool) },
		Listen: func(ctx context.Context, channel string) (sqlstore.Listener, error) { return listen(ctx, cfg, channel) },
		Close: func() error {
			err := view.Close() // its opener goroutine; the pool stays open
			pool.Close()
			return err
		}}, nil
}

// pgxQ adapts a pgxpool (poolDB) or a transaction (txQ), which share
// these methods, to sqlstore.DB.
type pgxQ[T interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}] struct{ q T }

type (
	poolDB = pgxQ[*pgxpool.Pool]
	txQ    = pgxQ[pgx.Tx]
)

func (d pgxQ[T]) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return d.q.QueryRow(ctx, q, args...)
}

func (d pgxQ[T]) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	return d.q.Query(ctx, q, args...) //nolint:sqlclosecheck // the caller closes the rows
}

func (d pgxQ[T]) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := d.q.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

// InTx runs fn in a transaction, rolled back on any error, including a
// cancelled context. On the pool it is a pipeTx, whose BEGIN goes out
// with the first statement; pgx.BeginFunc otherwise.
func (d pgxQ[T]) InTx(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	if p, ok := any(d.q).(*pgxpool.Pool); ok {
		return pipeInTx(ctx, p, fn)
	}
	return pgx.BeginFunc(ctx, d.q, func(tx pgx.Tx) error { return fn(txQ{tx}) })
}

// parseError is pgx's DSN parse error without the DSN it quotes: pgx
// masks the password it found, but a password it misread (an @ or : not
// percent-encoded) shows in pieces. The reason after the quote stays.
func parseError(err error) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+3:]
	} else {
		msg = "not a PostgreSQL DSN"
	}
	return fmt.Errorf("postgres: the DSN cannot be parsed (%s); if the user name or password holds @, :, /, ? or #, percent-encode them (%%40, %%3A, %%2F, %%3F, %%23)", msg)
}

// listen opens a connection of its own, outside the pool, that LISTENs
// on channel: the one connection per store on which lock waiters hear
// releases (sqlstore.Locks). A pooled connection would be handed to
// other statements between notifications.
func listen(ctx context.Context, cfg *pgxpool.Config, channel string) (sqlstore.Listener, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("postgres: connect the lock listener: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("postgres: listen: %w", err)
	}
	return pgListener{conn}, nil
}

// pgListener is sqlstore.Listener on a pgx connection.
type pgListener struct{ c *pgx.Conn }

func (l pgListener) Next(ctx context.Context) (string, error) {
	n, err := l.c.WaitForNotification(ctx)
	if err != nil {
		return "", err
	}
	return n.Payload, nil
}

func (l pgListener) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return l.c.Close(ctx)
}
