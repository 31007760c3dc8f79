// Package postgres is idgen's PostgreSQL backend, for several instances
// sharing one database. It uses a pgxpool, which reconnects by itself
// after the server restarts or a connection drops.
//
// A reservation is one short transaction: SELECT … FOR UPDATE on the
// tag's row, UPDATE, COMMIT. The transaction is rolled back on any error
// or cancelled context, so no row lock outlives a failed call. The same
// SQL runs on engines that speak the PostgreSQL protocol and support row
// locks, such as CockroachDB and YugabyteDB.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idgen/idgen/fence"
	"github.com/idgen/idgen/migrations"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// Store is the store over PostgreSQL; see package store.
type Store = store.Store

func init() {
	sqlstore.Register(sqlstore.Driver{Name: "postgres", Schemes: []string{"postgres", "postgresql"},
		Bare: func(dsn string) (bool, error) { return isKeyValue(dsn), nil }, Check: check, Open: open})
}

var dialect = sqlstore.Dialect{
	LockRow:      `SELECT max_id, step FROM id_sequence WHERE biz_tag = $1 FOR UPDATE`,
	Advance:      `UPDATE id_sequence SET max_id = $1, updated_at = now() WHERE biz_tag = $2`,
	Insert:       `INSERT INTO id_sequence (biz_tag, max_id, step, description) VALUES ($1, $2, $3, $4)`,
	Release:      `UPDATE id_sequence SET max_id = $1, updated_at = now() WHERE biz_tag = $2 AND max_id = $3`,
	List:         `SELECT biz_tag, max_id, step, description, updated_at FROM id_sequence ORDER BY biz_tag`,
	SetStep:      `UPDATE id_sequence SET step = $1, updated_at = now() WHERE biz_tag = $2`,
	OpaqueInsert: `INSERT INTO tag_opaque (biz_tag, key_fingerprint) VALUES ($1, $2)`,
	OpaqueSelect: `SELECT COALESCE((SELECT o.key_fingerprint FROM tag_opaque o WHERE o.biz_tag = $1), '') FROM id_sequence WHERE biz_tag = $2`,
	OpaqueList:   `SELECT biz_tag, key_fingerprint FROM tag_opaque`,
	NoRows:       pgx.ErrNoRows,
	IsDuplicate: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "23505"
	},

	WorkerSelectFree: `SELECT worker_id, lease_expires_at, last_timestamp FROM worker_node
		WHERE worker_id >= $1 AND worker_id <= $2 AND (owner = '' OR lease_expires_at <= $3) AND pinned = 0 ORDER BY worker_id LIMIT 1 FOR UPDATE SKIP LOCKED`,
	WorkerTake:      `UPDATE worker_node SET owner = $1, lease_expires_at = $2, last_timestamp = $3, pinned = $4, updated_at = now() WHERE worker_id = $5`,
	WorkerSelectOne: `SELECT owner, lease_expires_at, last_timestamp FROM worker_node WHERE worker_id = $1 FOR UPDATE`,
	WorkerUnpin:     `UPDATE worker_node SET pinned = 0 WHERE worker_id = $1`,
	WorkerLowestMissing: `SELECT COALESCE(MIN(c.w), -1) FROM (SELECT CAST($1 AS INTEGER) AS w UNION ALL SELECT worker_id + 1 FROM worker_node WHERE worker_id >= $2 AND worker_id < $3) c
		WHERE c.w <= $4 AND NOT EXISTS (SELECT 1 FROM worker_node n WHERE n.worker_id = c.w)`,
	WorkerSeed: `INSERT INTO worker_node (worker_id) VALUES %s ON CONFLICT (worker_id) DO NOTHING`,
	WorkerRenew: `UPDATE worker_node SET lease_expires_at = GREATEST(lease_expires_at, $1), last_timestamp = GREATEST(last_timestamp, $2), updated_at = now()
		WHERE worker_id = $3 AND owner = $4 AND lease_expires_at > $5`,
	WorkerRelease: `UPDATE worker_node SET owner = '', lease_expires_at = 0, last_timestamp = GREATEST(last_timestamp, $1), updated_at = now()
		WHERE worker_id = $2 AND owner = $3`,
	WorkerList: `SELECT worker_id, owner, lease_expires_at, last_timestamp FROM worker_node ORDER BY worker_id`,
	IsRetryable: func(err error) bool {
		var pe *pgconn.PgError
		// deadlock_detected, serialization_failure
		return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
	},

	// snowflake_layout, and worker_node for Relayout.
	LayoutAnchor: `INSERT INTO snowflake_layout (lease_table, ordinal, epoch_ms, time_bits, worker_bits, sequence_bits) VALUES ($1, 0, $2, $3, $4, $5) ON CONFLICT (lease_table, ordinal) DO NOTHING`,
	LayoutLock:   `SELECT ordinal FROM snowflake_layout WHERE lease_table = $1 AND ordinal = 0 FOR UPDATE`,
	LayoutSelect: `SELECT ordinal, epoch_ms, time_bits, worker_bits, sequence_bits, worker_from, worker_to, not_before, retired_at FROM snowflake_layout WHERE lease_table = $1 ORDER BY ordinal FOR UPDATE`,
	LayoutList:   `SELECT ordinal, epoch_ms, time_bits, worker_bits, sequence_bits, worker_from, worker_to, not_before, retired_at FROM snowflake_layout WHERE lease_table = $1 ORDER BY ordinal`,
	LayoutInsert: `INSERT INTO snowflake_layout (lease_table, ordinal, epoch_ms, time_bits, worker_bits, sequence_bits, worker_from, worker_to, not_before, retired_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
	LayoutUpdate: `UPDATE snowflake_layout SET epoch_ms = $1, time_bits = $2, worker_bits = $3, sequence_bits = $4, worker_from = $5, worker_to = $6, not_before = $7, retired_at = $8, updated_at = now() WHERE lease_table = $9 AND ordinal = $10`,
	WorkerHeld:   `SELECT worker_id, owner, lease_expires_at FROM worker_node WHERE owner <> '' ORDER BY worker_id FOR UPDATE`,
	WorkerDisown: `UPDATE worker_node SET owner = '', last_timestamp = GREATEST(last_timestamp, lease_expires_at), lease_expires_at = 0, updated_at = now() WHERE owner <> ''`,
	WorkerLatest: `SELECT COALESCE(MAX(GREATEST(last_timestamp, lease_expires_at)), 0) FROM worker_node`,
	Identity:     &identity,
}

// identity is the store's history on PostgreSQL: the cluster's
// system_identifier, the same on a primary and its physical replicas
// (read once per connection, see connSystem); the
// timeline, which a promotion or a point-in-time recovery moves on; and
// the WAL position, which only a restore takes back. Every function here
// is executable by any role: no superuser, no pg_monitor.
var identity = sqlstore.IdentitySQL{
	Kind:       fence.Postgres,
	Server:     `'', substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8), pg_current_wal_lsn()::text, ''`,
	ConnSystem: connSystem,
	Lock:       `SELECT generation FROM idgen_fence WHERE id = 1 FOR UPDATE`,
	Tables: `SELECT c.relname::text FROM pg_class c WHERE c.relkind IN ('r', 'p') AND c.relname IN ('id_sequence', 'leaf_alloc')
		AND pg_table_is_visible(c.oid) ORDER BY 1`,
	Bump:      `UPDATE id_sequence SET max_id = CASE WHEN max_id <= $1 THEN max_id + $2 ELSE 9223372036854775807 END, updated_at = now()`,
	CountLive: `SELECT COUNT(*) FROM worker_node WHERE owner <> '' AND lease_expires_at > $1`,
	Hold: `UPDATE worker_node SET lease_expires_at = $1, updated_at = now()
		WHERE owner <> '' AND lease_expires_at > $2 AND lease_expires_at < $3`,
	Floor: `UPDATE worker_node SET last_timestamp = $1, updated_at = now() WHERE last_timestamp < $2`,
	Write: `UPDATE idgen_fence SET backend = $1, system_id = $2, timeline = $3, log_position = $4, generation = $5,
		fence_until = $6, fences = fences + $7, fenced_at = GREATEST(fenced_at, $8), recorded_at = now() WHERE id = 1`,
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
	if t, ok := q.(txQ); ok {
		data = t.tx.Conn().PgConn().CustomData()
		if id, ok := data[systemKey].(string); ok {
			return id, nil
		}
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

// open connects the pool, and the database/sql view of it that
// migrations and tools use, opened once and closed with it.
func open(ctx context.Context, dsn string) (*sqlstore.Conn, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse DSN: %w", err)
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
	return &sqlstore.Conn{DB: poolDB{pool}, SQL: view, Dialect: dialect, Idem: idemStatements,
		Migrations: migrations.Postgres, OpenIdem: func() (sqlstore.DB, sqlstore.DB, func()) { return openIdem(pool) },
		Close: func() error {
			err := view.Close() // its opener goroutine; the pool stays open
			pool.Close()
			return err
		}}, nil
}

// poolDB adapts a pgxpool to sqlstore.DB.
type poolDB struct{ p *pgxpool.Pool }

func (d poolDB) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return d.p.QueryRow(ctx, q, args...)
}

func (d poolDB) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	return d.p.Query(ctx, q, args...) //nolint:sqlclosecheck // the caller closes the rows
}

func (d poolDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := d.p.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

// InTx runs fn in a transaction; pgx.BeginFunc rolls back on any error,
// including a cancelled context.
func (d poolDB) InTx(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	return pgx.BeginFunc(ctx, d.p, func(tx pgx.Tx) error { return fn(txQ{tx}) })
}

type txQ struct{ tx pgx.Tx }

func (t txQ) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return t.tx.QueryRow(ctx, q, args...)
}

func (t txQ) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	return t.tx.Query(ctx, q, args...) //nolint:sqlclosecheck // the caller closes the rows
}

func (t txQ) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}
