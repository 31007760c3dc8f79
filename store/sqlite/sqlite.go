// Package sqlite is idgen's embedded backend: the segment store in one
// local SQLite file, with no server to run. It is the default of the
// binary, so that `idgen serve` works with zero setup, and a good fit for
// a single instance. Several processes may share the file on one host;
// instances on different hosts need the postgres or mysql store.
//
// SQLite has no SELECT … FOR UPDATE. Every transaction here starts with
// BEGIN IMMEDIATE, which takes the database's write lock up front and so
// serialises reservations, and worker-ID claims, just as a row lock would.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idgen/idgen/fence"
	"github.com/idgen/idgen/migrations"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// Store is a segment store in a SQLite file. Leases returns the worker
// leases of snowflake mode in the same file.
type Store struct {
	seg    *sqlstore.Store
	db     *sql.DB
	leases *sqlstore.Leases
	guard  *sqlstore.Guard
	table  sqlstore.SequenceTable
	path   string
	idem   idemPool // idempotency.go
}

var dialect = sqlstore.Dialect{
	LockRow:      `SELECT max_id, step FROM id_sequence WHERE biz_tag = ?`,
	Advance:      `UPDATE id_sequence SET max_id = ?, updated_at = CURRENT_TIMESTAMP WHERE biz_tag = ?`,
	Insert:       `INSERT INTO id_sequence (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)`,
	Release:      `UPDATE id_sequence SET max_id = ?, updated_at = CURRENT_TIMESTAMP WHERE biz_tag = ? AND max_id = ?`,
	List:         `SELECT biz_tag, max_id, step, description, updated_at FROM id_sequence ORDER BY biz_tag`,
	SetStep:      `UPDATE id_sequence SET step = ?, updated_at = CURRENT_TIMESTAMP WHERE biz_tag = ?`,
	OpaqueInsert: `INSERT INTO tag_opaque (biz_tag, key_fingerprint) VALUES (?, ?)`,
	OpaqueSelect: `SELECT COALESCE((SELECT o.key_fingerprint FROM tag_opaque o WHERE o.biz_tag = ?), '') FROM id_sequence WHERE biz_tag = ?`,
	OpaqueList:   `SELECT biz_tag, key_fingerprint FROM tag_opaque`,
	NoRows:       sql.ErrNoRows,
	IsDuplicate: func(err error) bool {
		var se *sqlite.Error
		return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE)
	},

	// No FOR UPDATE: the transaction's BEGIN IMMEDIATE holds the write
	// lock, so claims run one at a time.
	WorkerSelectFree: `SELECT worker_id, lease_expires_at, last_timestamp FROM worker_node
		WHERE worker_id >= ? AND worker_id <= ? AND (owner = '' OR lease_expires_at <= ?) AND pinned = 0 ORDER BY worker_id LIMIT 1`,
	WorkerTake:      `UPDATE worker_node SET owner = ?, lease_expires_at = ?, last_timestamp = ?, pinned = ?, updated_at = CURRENT_TIMESTAMP WHERE worker_id = ?`,
	WorkerSelectOne: `SELECT owner, lease_expires_at, last_timestamp FROM worker_node WHERE worker_id = ?`,
	WorkerUnpin:     `UPDATE worker_node SET pinned = 0 WHERE worker_id = ?`,
	WorkerLowestMissing: `SELECT COALESCE(MIN(c.w), -1) FROM (SELECT CAST(? AS INTEGER) AS w UNION ALL SELECT worker_id + 1 FROM worker_node WHERE worker_id >= ? AND worker_id < ?) c
		WHERE c.w <= ? AND NOT EXISTS (SELECT 1 FROM worker_node n WHERE n.worker_id = c.w)`,
	WorkerSeed: `INSERT INTO worker_node (worker_id) VALUES %s ON CONFLICT (worker_id) DO NOTHING`,
	WorkerRenew: `UPDATE worker_node SET lease_expires_at = MAX(lease_expires_at, ?), last_timestamp = MAX(last_timestamp, ?), updated_at = CURRENT_TIMESTAMP
		WHERE worker_id = ? AND owner = ? AND lease_expires_at > ?`,
	WorkerRelease: `UPDATE worker_node SET owner = '', lease_expires_at = 0, last_timestamp = MAX(last_timestamp, ?), updated_at = CURRENT_TIMESTAMP
		WHERE worker_id = ? AND owner = ?`,
	WorkerList: `SELECT worker_id, owner, lease_expires_at, last_timestamp FROM worker_node ORDER BY worker_id`,

	// snowflake_layout, and worker_node for Relayout; no FOR UPDATE here
	// either, BEGIN IMMEDIATE serialises.
	LayoutAnchor: `INSERT INTO snowflake_layout (lease_table, ordinal, epoch_ms, time_bits, worker_bits, sequence_bits) VALUES (?, 0, ?, ?, ?, ?) ON CONFLICT (lease_table, ordinal) DO NOTHING`,
	LayoutLock:   `SELECT ordinal FROM snowflake_layout WHERE lease_table = ? AND ordinal = 0`,
	LayoutSelect: `SELECT ordinal, epoch_ms, time_bits, worker_bits, sequence_bits, worker_from, worker_to, not_before, retired_at FROM snowflake_layout WHERE lease_table = ? ORDER BY ordinal`,
	LayoutList:   `SELECT ordinal, epoch_ms, time_bits, worker_bits, sequence_bits, worker_from, worker_to, not_before, retired_at FROM snowflake_layout WHERE lease_table = ? ORDER BY ordinal`,
	LayoutInsert: `INSERT INTO snowflake_layout (lease_table, ordinal, epoch_ms, time_bits, worker_bits, sequence_bits, worker_from, worker_to, not_before, retired_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	LayoutUpdate: `UPDATE snowflake_layout SET epoch_ms = ?, time_bits = ?, worker_bits = ?, sequence_bits = ?, worker_from = ?, worker_to = ?, not_before = ?, retired_at = ?, updated_at = CURRENT_TIMESTAMP WHERE lease_table = ? AND ordinal = ?`,
	WorkerHeld:   `SELECT worker_id, owner, lease_expires_at FROM worker_node WHERE owner <> '' ORDER BY worker_id`,
	WorkerDisown: `UPDATE worker_node SET owner = '', last_timestamp = MAX(last_timestamp, lease_expires_at), lease_expires_at = 0, updated_at = CURRENT_TIMESTAMP WHERE owner <> ''`,
	WorkerLatest: `SELECT COALESCE(MAX(MAX(last_timestamp, lease_expires_at)), 0) FROM worker_node`,
	Identity:     &identity,
}

// identity is the store's history in a SQLite file, which has no server
// to ask: the random store_id the file got at its first migration, and
// its ticks, moved up by every checked transaction (Tick). A process
// remembers the highest ticks it saw, and so does the sidecar file (see
// sidecar), so a file put back from an older copy is found.
var identity = sqlstore.IdentitySQL{
	Kind: fence.SQLite,
	Server: `COALESCE((SELECT store_id FROM idgen_fence WHERE id = 1), ''), '',
		CAST(COALESCE((SELECT ticks FROM idgen_fence WHERE id = 1), 0) AS TEXT), ''`,
	Tick:      `UPDATE idgen_fence SET ticks = ticks + 1 WHERE id = 1`,
	Lock:      `SELECT generation FROM idgen_fence WHERE id = 1`, // under BEGIN IMMEDIATE's write lock
	Tables:    `SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('id_sequence', 'leaf_alloc') ORDER BY 1`,
	Bump:      `UPDATE id_sequence SET max_id = CASE WHEN max_id <= ? THEN max_id + ? ELSE 9223372036854775807 END, updated_at = CURRENT_TIMESTAMP`,
	CountLive: `SELECT COUNT(*) FROM worker_node WHERE owner <> '' AND lease_expires_at > ?`,
	Hold: `UPDATE worker_node SET lease_expires_at = ?, updated_at = CURRENT_TIMESTAMP
		WHERE owner <> '' AND lease_expires_at > ? AND lease_expires_at < ?`,
	Floor: `UPDATE worker_node SET last_timestamp = ?, updated_at = CURRENT_TIMESTAMP WHERE last_timestamp < ?`,
	Write: `UPDATE idgen_fence SET backend = ?, system_id = ?, timeline = ?, log_position = ?, generation = ?,
		fence_until = ?, fences = fences + ?, fenced_at = MAX(fenced_at, ?), recorded_at = CURRENT_TIMESTAMP WHERE id = 1`,
}

// Open opens (creating if needed) the SQLite file named by dsn, which is
// either a path or a URL of the form sqlite://PATH (sqlite://./idgen.db,
// sqlite:///var/lib/idgen.db). It does not create the schema; call
// Migrate.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenTable(ctx, dsn, sqlstore.IDSequence.Name)
}

// OpenTable is Open with segments reserved from the named table:
// "id_sequence", idgen's own, or "leaf_alloc", Meituan Leaf's, used as it
// is (Migrate then leaves idgen's own sequence table out).
func OpenTable(ctx context.Context, dsn, table string) (*Store, error) {
	t, err := sqlstore.ParseSequenceTable(table)
	if err != nil {
		return nil, err
	}
	path, err := Path(dsn)
	if err != nil {
		return nil, err
	}
	db, err := openFile(ctx, path, "FULL")
	if err != nil {
		return nil, err
	}
	// Path refused in-memory databases, so there is always a file for
	// the sidecar to sit beside.
	opts := sqlstore.GuardOptions{}
	side := sidecar(path + ".fence")
	if opts.Memory, err = side.load(); err != nil {
		_ = db.Close()
		return nil, err
	}
	opts.Persist = side.save
	sdb := sqlstore.StdDB{DB: db}
	g, err := sqlstore.NewGuard(sdb, dialect, opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Store{seg: sqlstore.NewGuarded(sdb, dialect.OnTable(t), g), db: db,
		leases: sqlstore.NewGuardedLeases(sdb, dialect, g), guard: g, table: t, path: path}, nil
}

// openFile opens the pool of the file at path with the given
// synchronous setting.
func openFile(ctx context.Context, path, synchronous string) (*sql.DB, error) {
	// WAL lets readers run beside the writer; busy_timeout makes a second
	// process wait for the write lock instead of failing at once.
	// synchronous(FULL) syncs the WAL at every commit: at NORMAL, SQLite
	// lets a committed WAL transaction roll back after a power loss or an
	// OS crash, and a reservation that rolls back is handed out twice
	// after the restart. A reservation is rare, so the fsync costs little.
	// The store's pool is FULL; only the idempotency key statements whose
	// loss is harmless run on a NORMAL one (idempotency.go).
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+synchronous+")")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return db, nil
}

// Leases returns the snowflake.LeaseStore of this file's worker_node
// table, for snowflake.NewLeased. It shares the Store's pool; close the
// Store after the Leased generators that use it.
func (s *Store) Leases() snowflake.LeaseTable { return s.leases }

// ErrInMemory is returned for a DSN of an in-memory database. Its state
// dies with the connection, and every connection of the pool gets an
// empty one of its own: reservations would be forgotten, and the same
// IDs handed out again after every restart, or at once by two
// connections. A store must outlive the process.
var ErrInMemory = errors.New("sqlite: an in-memory database is lost with its connection and the process, so IDs would repeat: use a file, such as sqlite://./idgen.db (in tests, a file in t.TempDir())")

// Path returns the file path of a sqlite DSN. It refuses in-memory
// databases (":memory:", "file::memory:", "mode=memory", "vfs=memdb")
// with ErrInMemory.
func Path(dsn string) (string, error) {
	path := strings.TrimPrefix(dsn, "sqlite://")
	path, query, _ := strings.Cut(path, "?")
	if inMemory(path, query) {
		return "", ErrInMemory
	}
	if path == "" {
		return "", errors.New("sqlite: empty path: use sqlite://./idgen.db or a file path")
	}
	return path, nil
}

// inMemory reports whether SQLite would open path?query as a database
// that lives only in memory.
func inMemory(path, query string) bool {
	name := strings.TrimPrefix(path, "file:")
	if strings.HasPrefix(name, ":memory:") {
		return true
	}
	q, _ := url.ParseQuery(query)
	return q.Get("mode") == "memory" || q.Get("vfs") == "memdb"
}

// Migrate creates or upgrades the schema.
func (s *Store) Migrate(ctx context.Context, logger *slog.Logger) (int64, error) {
	if !s.table.Own() {
		return migrations.UpShared(ctx, s.db, migrations.SQLite, logger)
	}
	return migrations.Up(ctx, s.db, migrations.SQLite, logger)
}

// Ping checks that the file can be read.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// closeWait bounds how long Close waits for connections still in use.
const closeWait = 5 * time.Second

// Close closes the file. database/sql closes a connection that is still
// in use (a transaction a cancelled context is rolling back) only when it
// is released, after DB.Close has returned, so Close waits for that, up
// to closeWait: the last connection to close checkpoints the WAL into the
// file and removes it, and a copy of the file taken after Close is then
// the whole database.
func (s *Store) Close() error {
	s.idem.close()
	err := s.db.Close()
	for deadline := time.Now().Add(closeWait); s.db.Stats().OpenConnections > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	return err
}

// DB returns the underlying pool, for tests and tools.
func (s *Store) DB() *sql.DB { return s.db }
