// Package store is idgen's SQL store, written once over every SQL
// backend: the segment table (segment.Store and its admin), the worker
// leases of snowflake mode, fencing against a changed history (package
// fence), the idempotency keys and the locks (package lock), all in one
// database.
//
// Open picks the backend from the DSN's scheme, as database/sql picks a
// driver by name: store/sqlite, store/postgres and store/mysql register
// theirs when imported. Each also has an Open of its own, for a program
// that wants one backend.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/idempotency/dedup"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/migrations"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// The sequence tables a store can reserve segments from. IDSequence is
// idgen's own, which its migrations create; LeafAlloc is Meituan Leaf's,
// used as it is, so that Leaf's servers and idgen can serve the same
// tags from one table while callers move.
const (
	IDSequence = "id_sequence"
	LeafAlloc  = "leaf_alloc"
)

// CheckTable returns an error unless name is a known sequence table;
// "" means IDSequence.
func CheckTable(name string) error {
	_, err := sqlstore.ParseSequenceTable(name)
	return err
}

// Options configures Open.
type Options struct {
	// Driver names the backend: "sqlite", "postgres" or "mysql". Empty,
	// Open takes it from the DSN (see Driver).
	Driver string
	// Table is the sequence table segments are reserved from:
	// IDSequence (also when empty) or LeafAlloc, with which Migrate
	// leaves idgen's own sequence table out.
	Table string
	// Owner names this process in worker_node: its presence lease and
	// the worker leases of generators made from Leases without an Owner
	// of their own. Zero means snowflake.NewOwner().
	Owner string
}

// Driver returns the name of the backend a DSN names, without
// connecting: by its scheme (sqlite://, file://, postgres://,
// postgresql://, mysql://), or PostgreSQL's key=value form. The backend's
// package must be imported. Anything else is refused rather than taken
// for a SQLite path, so that a mistyped DSN does not create a file named
// after it.
func Driver(dsn string) (string, error) {
	d, err := sqlstore.Lookup(dsn)
	return d.Name, err
}

// CheckDSN checks a DSN without connecting.
func CheckDSN(dsn string) error {
	d, err := sqlstore.Lookup(dsn)
	if err != nil {
		return err
	}
	if err := checkUserInfo(dsn); err != nil {
		return err
	}
	return d.Check(dsn)
}

// ErrDSNUserInfo is returned by CheckDSN for a URL DSN whose user info
// (user:password@) cannot be told from the host: a password holding @,
// #, / or ?, not percent-encoded. The error names no part of the DSN, so
// that no piece of the password reaches a terminal or a log.
var ErrDSNUserInfo = errors.New("store: the DSN's user:password@ part cannot be read: percent-encode @ as %40, : as %3A, / as %2F, ? as %3F and # as %23 in the user name and password (postgres://user:p%40ss@host:5432/db)")

// checkUserInfo refuses a URL DSN with more than one @ before its query,
// or with a # beside user info: url.Parse and the drivers would take part of the password
// for the host or a fragment.
func checkUserInfo(dsn string) error {
	_, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return nil
	}
	beforeQuery, _, _ := strings.Cut(rest, "?")
	if n := strings.Count(beforeQuery, "@"); n > 1 || (n == 1 && strings.Contains(dsn, "#")) {
		return ErrDSNUserInfo
	}
	return nil
}

// Store is a segment store, the worker lease table of snowflake mode and
// the idempotency keys in one SQL database. It is safe for concurrent
// use.
type Store struct {
	conn    *sqlstore.Conn
	d       sqlstore.Dialect
	idemSQL sqlstore.IdemStatements
	dedup   *sqlstore.Dedup
	own     bool // the sequence table is idgen's own
	seg     *sqlstore.Store
	leases  *sqlstore.Leases
	guard   *sqlstore.Guard
	locks   *sqlstore.Locks
	owner   string

	// pres is the presence lease the store holds (see present), nil
	// until the first write; claiming is closed when a claim in flight
	// ends; closed is set by Close. presMu guards all three, and is never
	// held across a database call.
	presMu   sync.Mutex
	pres     atomic.Pointer[Presence]
	claiming chan struct{}
	closed   bool

	idemOnce  sync.Once
	idem      *sqlstore.Idempotency
	idemClose func()
}

var (
	_ segment.Store    = (*Store)(nil)
	_ segment.Releaser = (*Store)(nil)
	_ segment.Raiser   = (*Store)(nil)
)

// Open connects to the database dsn names and checks the connection
// once. It does not create the schema; call Migrate.
//
// The store is safe to share between processes as it is: its first
// reservation, creation, raise or bump claims a presence lease (see
// Presence), so that a fence counts the process and waits for its
// witness raise, and its first checked transaction adopts the fence
// parameters the store records (RecordFence). No call other than Migrate
// is needed.
func Open(ctx context.Context, dsn string, o Options) (*Store, error) {
	t, err := sqlstore.ParseSequenceTable(o.Table)
	if err != nil {
		return nil, err
	}
	var d sqlstore.Driver
	if o.Driver != "" {
		d, err = sqlstore.Named(o.Driver)
	} else {
		d, err = sqlstore.Lookup(dsn)
	}
	if err != nil {
		return nil, err
	}
	c, err := d.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	owner := o.Owner
	if owner == "" {
		owner = snowflake.NewOwner()
	}
	s, err := build(c, t, owner)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return s, nil
}

// build renders the SQL of c's database, with segments in t, and puts
// the store together over it, for the process named owner.
func build(c *sqlstore.Conn, t sqlstore.SequenceTable, owner string) (*Store, error) {
	d, err := sqlstore.NewDialect(c.Spelling, t)
	if err != nil {
		return nil, err
	}
	idem, err := sqlstore.NewIdemStatements(c.Spelling)
	if err != nil {
		return nil, err
	}
	o := c.Guard
	o.Owner = owner
	locks, err := sqlstore.NewLockStatements(c.Spelling)
	if err != nil {
		return nil, err
	}
	g, err := sqlstore.NewGuard(c.DB, d, o)
	if err != nil {
		return nil, err
	}
	dd, err := sqlstore.NewDedupStatements(c.Spelling)
	if err != nil {
		return nil, err
	}
	return &Store{conn: c, d: d, idemSQL: idem, dedup: sqlstore.NewDedup(c.DB, d, dd), own: t.Own(), seg: sqlstore.NewGuarded(c.DB, d, g),
		leases: sqlstore.NewGuardedLeases(c.DB, d, g, owner), guard: g,
		locks: sqlstore.NewLocks(c.DB, d, locks, g, c.Listen), owner: owner}, nil
}

// Owner returns the name this process holds leases under in worker_node
// (Options.Owner).
func (s *Store) Owner() string { return s.owner }

// leaseTTL is the lease TTL of the store's presence: the fleet's, or this
// process's own until the store's record has been read.
func (s *Store) leaseTTL() time.Duration {
	if ttl := s.guard.LeaseTTL(); ttl > 0 {
		return ttl
	}
	return fence.DefaultLeaseTTL
}

// Migrate creates or upgrades the schema, under a lock (PostgreSQL's
// session advisory lock, goose's lock table on MySQL, SQLite's write
// lock), so that instances starting together apply it once.
//
// On a new store it also records the server's identity (package fence)
// before any row exists: a store found later with rows but no record has
// lost it, and is fenced rather than trusted.
func (s *Store) Migrate(ctx context.Context, logger *slog.Logger) (int64, error) {
	up := migrations.Up
	if !s.own {
		up = migrations.UpShared
	}
	v, err := up(ctx, s.conn.SQL, s.conn.Migrations, logger)
	if err != nil || s.conn.NoFence != nil {
		return v, err
	}
	if err := s.guard.Record(ctx); err != nil {
		return v, fmt.Errorf("store: record the identity: %w", err)
	}
	return v, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.conn.SQL.PingContext(ctx) }

// Close releases the store's presence lease, waiting at most 5 s for the
// database, and closes the store's pools, those of Idempotency and DB's
// too. Close the allocators and generators that use the store first.
func (s *Store) Close() error {
	perr := s.closePresence()
	s.locks.Close()
	s.idemOnce.Do(func() {}) // none opened after Close
	if s.idemClose != nil {
		s.idemClose()
	}
	return errors.Join(perr, s.conn.Close())
}

// DB returns the database/sql pool of the store, for tests and tools. It
// is the Store's own: Close closes it.
func (s *Store) DB() *sql.DB { return s.conn.SQL }

// Leases returns the snowflake.LeaseStore of the database's worker_node
// table, for snowflake.NewLeased. Claims lock rows with FOR UPDATE SKIP
// LOCKED (SQLite's one writer serialises them instead), so instances
// starting together never wait for each other. It shares the Store's
// pool; close the Store after the Leased generators that use it.
func (s *Store) Leases() snowflake.LeaseTable { return s.leases }

// Locks returns the lock.Backend of the database's lock tables
// (migration 00016), for lock.New: named locks whose fencing tokens the
// store's fence raises after a failover or a restore as it raises IDs,
// so that every token granted after one is above every token granted
// before. Waiters are woken by LISTEN/NOTIFY on PostgreSQL, on a
// connection of the Store's own opened at the first wait; on MySQL and
// SQLite they poll (see store/internal/sqlstore's Locks). Expiries are
// by this process's clock, as worker leases' are.
//
// Waiters are granted in arrival order, so a TryAcquire of a free lock
// that others wait for is refused: its *lock.HeldError's Holder is then
// the first live waiter, the owner the lock is promised to, with Token 0
// (no grant holds the lock) and Expires the end of that waiter's own
// 2-second TTL, which it refreshes while it waits.
//
// It shares the Store's pool. Close neither releases grants nor removes
// waiters: they lapse with their TTLs, as after a crash.
//
// Its first Acquire claims the store's presence lease, as a reservation
// does: after a fence, grants are held until every live instance has
// checked in, its witness raise moving each lock it was granted above
// that token, so that a grant lost with a fence's own record is not made
// again while its holder lives.
func (s *Store) Locks() lock.Backend { return presentLocks{s.locks, s} }

// presentLocks is the store's lock backend, claiming the store's
// presence before a grant.
type presentLocks struct {
	*sqlstore.Locks
	s *Store
}

func (p presentLocks) Acquire(ctx context.Context, name, owner string, ttl time.Duration, wait bool) (lock.Grant, error) {
	if err := p.s.present(ctx); err != nil {
		return lock.Grant{}, err
	}
	return p.Locks.Acquire(ctx, name, owner, ttl, wait)
}

// Idempotency returns the store of idempotency keys (the idempotency_key
// table of migration 9) in the same database, for idempotency.New. Where
// the database allows it, only the answers are written durably, and the
// other statements on a pool of their own whose commits may return
// before they reach the disk, since losing them in a crash is harmless:
// PostgreSQL's synchronous_commit off, SQLite's synchronous NORMAL (with
// both on one connection each, so keyed requests queue for SQLite's one
// write lock in order). MySQL's log flush is a global setting, so there
// every statement is durable. Close closes its pools.
func (s *Store) Idempotency() idempotency.Store {
	s.idemOnce.Do(func() {
		durable, lazy := s.conn.DB, sqlstore.DB(nil)
		if s.conn.OpenIdem != nil {
			if d, l, closeIdem := s.conn.OpenIdem(); d != nil {
				durable, lazy, s.idemClose = d, l, closeIdem
			}
		}
		s.idem = sqlstore.NewIdempotency(durable, lazy, s.d, s.idemSQL)
	})
	if s.idem == nil {
		// Called after Close: every statement fails on the closed pool.
		return sqlstore.NewIdempotency(s.conn.DB, nil, s.d, s.idemSQL)
	}
	return s.idem
}

// Dedup returns the store of consumer dedup records (the idgen_dedup
// table of migration 00018), for dedup.New. Its records are written in
// the caller's transaction (dedup.Deduper.Do), which may be on DB or on
// any other pool of the same database; only the sweeps use the Store's
// pool.
func (s *Store) Dedup() dedup.Store { return s.dedup }

// Reserve implements segment.Store: it advances the tag's max_id by step
// in one transaction and returns the range it covered.
func (s *Store) Reserve(ctx context.Context, tag string, step int64) (segment.Range, error) {
	if err := s.present(ctx); err != nil {
		return segment.Range{}, err
	}
	return s.seg.Reserve(ctx, tag, step)
}

// Raise implements segment.Raiser: it moves the tag's max_id up to to,
// never down, and reports whether it moved.
func (s *Store) Raise(ctx context.Context, tag string, to int64) (bool, error) {
	if err := s.present(ctx); err != nil {
		return false, err
	}
	return s.seg.Raise(ctx, tag, to)
}

// Bump moves the tag's max_id up by n, skipping n IDs, and returns the new
// max_id: the repair after a restore or a failover that lost commits.
func (s *Store) Bump(ctx context.Context, tag string, n int64) (int64, error) {
	if err := s.present(ctx); err != nil {
		return 0, err
	}
	return s.seg.Bump(ctx, tag, n)
}

// BumpAll moves every tag's max_id up by n, and the store's tag floor
// with it, in one transaction, and returns every tag with its new
// max_id: `idgen tag bump --all --by N`. A tag created afterwards starts
// the floor above the start it asks for (see CreateTag), so a tag whose
// creation a restore lost, created again, starts above what the lost
// row handed out. A tag n would carry past the int64 limit is set to the
// limit (exhausted), as a fence does.
func (s *Store) BumpAll(ctx context.Context, n int64) ([]segment.Tag, error) {
	if err := s.present(ctx); err != nil {
		return nil, err
	}
	return s.seg.BumpAll(ctx, n)
}

// CreateTag implements segment.Store. On a store that has been fenced
// (or bumped with BumpAll) the tag starts the store's tag floor above
// t.MaxID: the sum of every fence's margin (fence.Record.Floor).
func (s *Store) CreateTag(ctx context.Context, t segment.Tag) error {
	if err := s.present(ctx); err != nil {
		return err
	}
	return s.seg.CreateTag(ctx, t)
}

// Release implements segment.Releaser: it hands the unused end of a range
// back, if no one reserved after it.
func (s *Store) Release(ctx context.Context, tag string, from, to int64) (bool, error) {
	return s.seg.Release(ctx, tag, from, to)
}

// ListTags returns every tag, ordered by name.
func (s *Store) ListTags(ctx context.Context) ([]segment.Tag, error) { return s.seg.ListTags(ctx) }

// TagOpaque returns the fingerprint of the key the tag was created
// under, "" for a plain tag, or an error wrapping segment.ErrTagNotFound;
// it implements opaque.Tags.
func (s *Store) TagOpaque(ctx context.Context, tag string) (string, error) {
	return s.seg.TagOpaque(ctx, tag)
}

// OpaqueRows returns every row of tag_opaque, tag name → fingerprint,
// whether or not the sequence table holds the tag: what a check that
// matches names otherwise than the database does (Leaf's
// case-insensitive biz_tag) needs to read.
func (s *Store) OpaqueRows(ctx context.Context) (map[string]string, error) {
	return s.seg.OpaqueRows(ctx)
}

// SetStep changes a tag's configured step; allocators pick it up at their
// next reservation.
func (s *Store) SetStep(ctx context.Context, tag string, step int64) error {
	return s.seg.SetStep(ctx, tag, step)
}

// Import creates every tag that has no row and raises every other to at
// least its MaxID, never lowering one, in one transaction: all or
// nothing, as `idgen import` promises. before[i] is tags[i]'s max_id
// before, or -1 when Import created it.
func (s *Store) Import(ctx context.Context, tags []segment.Tag) (before []int64, err error) {
	if err := s.present(ctx); err != nil {
		return nil, err
	}
	return s.seg.Import(ctx, tags)
}

// ObserveRetries makes f count the transactions this store ran again
// after a deadlock or a serialization failure, by operation: "reserve",
// "raise", "bump", "create", "import", "claim", "fence", "lock" (a lock
// grant) or "unlock". f must not block.
func (s *Store) ObserveRetries(f func(op string)) {
	s.seg.ObserveRetries(f)
	s.leases.ObserveRetries(f)
	s.guard.ObserveRetries(f)
	s.locks.ObserveRetries(f)
}

// ConfigureFence sets how the store fences when its history changes (a
// failover, a restore; see package fence) and where it logs the fence.
// Call it before the first reservation or claim.
func (s *Store) ConfigureFence(c fence.Config, log *slog.Logger) error {
	return s.guard.Configure(c, log)
}

// ErrFenceParams is returned by RecordFence for a process whose margin
// or lease TTL differs from the fleet's while other processes hold live
// leases; the message names both.
var ErrFenceParams = sqlstore.ErrParams

// RecordFence records the margin and lease TTL given to ConfigureFence
// as the fleet's, or, while other processes hold live leases, checks
// that they are the fleet's (ErrFenceParams). Call it after Migrate and
// ConfigureFence, before any lease is claimed: what serve does at start.
// Every fence uses the recorded values, whoever runs it, so one-shot
// programs (`idgen tag bump`, a library program that only creates tags)
// fence with the fleet's values without being told them.
func (s *Store) RecordFence(ctx context.Context) error {
	if s.conn.NoFence != nil {
		return nil
	}
	return s.guard.RecordParams(ctx)
}

// ObserveFences makes f hear of every fence this process performs. f
// must not block.
func (s *Store) ObserveFences(f func(fence.Event)) { s.guard.ObserveFences(f) }

// CheckIdentity reads the server's identity and the store's record of it
// now, recording or fencing as a reservation would: what an instance
// does at start. On a server that refuses the identity query (an engine
// that speaks the MySQL protocol only) it returns an error wrapping
// fence.ErrUnsupported, and the store runs without fencing.
func (s *Store) CheckIdentity(ctx context.Context) error {
	if s.conn.NoFence != nil {
		return s.conn.NoFence
	}
	return s.guard.Check(ctx)
}

// Identity returns the server's identity and the store's record of it,
// without checking them.
func (s *Store) Identity(ctx context.Context) (fence.Identity, fence.Record, error) {
	return s.guard.Read(ctx)
}
