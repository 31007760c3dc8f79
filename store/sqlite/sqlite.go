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
	"net/url"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idgen/idgen/migrations"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// spelling is SQLite's way of writing idgen's SQL. It has no FOR
// UPDATE: every transaction starts with BEGIN IMMEDIATE, whose write
// lock serialises reservations and claims.
var spelling = sqlstore.Spelling{
	Now: "CURRENT_TIMESTAMP", Greatest: "MAX", Int: "INTEGER",
	IdemSweep:  `DELETE FROM idempotency_key WHERE rowid IN (SELECT rowid FROM idempotency_key WHERE expires_at <= ? LIMIT ?)`,
	DedupSweep: `DELETE FROM idgen_dedup WHERE rowid IN (SELECT rowid FROM idgen_dedup WHERE expires_at <= ? LIMIT ?)`,
	NoRows:     sql.ErrNoRows,
	IsDuplicate: func(err error) bool {
		var se *sqlite.Error
		return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE)
	},
	// The identity of a file, which has no server to ask: the random
	// store_id the file got at its first migration, and its ticks, moved
	// up by every checked transaction (Tick). A process remembers the
	// highest ticks it saw, and so does the sidecar file (see sidecar),
	// so a file put back from an older copy is found.
	Identity: &sqlstore.ServerIdentity{
		Kind: fence.SQLite,
		Server: `COALESCE((SELECT store_id FROM idgen_fence WHERE id = 1), ''), '',
		CAST(COALESCE((SELECT ticks FROM idgen_fence WHERE id = 1), 0) AS TEXT), ''`,
		Tick:   `UPDATE idgen_fence SET ticks = ticks + 1 WHERE id = 1`,
		Tables: `SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('id_sequence', 'leaf_alloc') ORDER BY 1`,
	},
}

// Store is the store in a SQLite file; see package store.
type Store = store.Store

// Open opens (creating if needed) the SQLite file named by dsn, which is
// either a path or a URL of the form sqlite://PATH (sqlite://./idgen.db,
// sqlite:///var/lib/idgen.db) or file://PATH. It does not create the
// schema; call Migrate.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenTable(ctx, dsn, store.IDSequence)
}

// OpenTable is Open with segments reserved from the named table,
// store.IDSequence or store.LeafAlloc (see store.Options).
func OpenTable(ctx context.Context, dsn, table string) (*Store, error) {
	return store.Open(ctx, dsn, store.Options{Driver: "sqlite", Table: table})
}

// bare claims no DSN without a scheme, but refuses one that names an
// in-memory database, which no backend can take.
func bare(dsn string) (bool, error) {
	if _, err := Path(dsn); errors.Is(err, ErrInMemory) {
		return false, err
	}
	return false, nil
}

func init() {
	sqlstore.Register(sqlstore.Driver{Name: "sqlite", Schemes: []string{"sqlite", "file"}, Bare: bare,
		Check: func(dsn string) error { _, err := Path(dsn); return err }, Open: open})
}

// open opens the file's pool, with the fence's memory in the sidecar
// beside it.
func open(ctx context.Context, dsn string) (*sqlstore.Conn, error) {
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
	side := sidecar(path + ".fence")
	mem, err := side.load()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &sqlstore.Conn{DB: sqlstore.StdDB{DB: db}, SQL: db, Spelling: spelling,
		Migrations: migrations.SQLite, Guard: sqlstore.GuardOptions{Memory: mem, Persist: side.save},
		OpenIdem: func() (sqlstore.DB, sqlstore.DB, func()) { return openIdem(path) },
		Close:    func() error { return closeFile(db) }}, nil
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
	db, err := sqlOpen(ctx, "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return db, nil
}

// ErrInMemory is returned for a DSN of an in-memory database. Its state
// dies with the connection, and every connection of the pool gets an
// empty one of its own: reservations would be forgotten, and the same
// IDs handed out again after every restart, or at once by two
// connections. A store must outlive the process.
var ErrInMemory = errors.New("sqlite: an in-memory database is lost with its connection and the process, so IDs would repeat: use a file, such as sqlite://./idgen.db (in tests, a file in t.TempDir())")

// Path returns the file path of a sqlite DSN: a path, sqlite://PATH or
// file://PATH. It refuses in-memory databases (":memory:",
// "file::memory:", "mode=memory", "vfs=memdb") with ErrInMemory.
func Path(dsn string) (string, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(dsn, "file://"), "sqlite://")
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

// closeWait bounds how long Close waits for connections still in use.
const closeWait = 5 * time.Second

// closeFile closes the file's pool. database/sql closes a connection that is still
// in use (a transaction a cancelled context is rolling back) only when it
// is released, after DB.Close has returned, so Close waits for that, up
// to closeWait: the last connection to close checkpoints the WAL into the
// file and removes it, and a copy of the file taken after the Store's
// Close is then the whole database.
func closeFile(db *sql.DB) error {
	err := db.Close()
	for deadline := time.Now().Add(closeWait); db.Stats().OpenConnections > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	return err
}
