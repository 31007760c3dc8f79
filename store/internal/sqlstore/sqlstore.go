// Package sqlstore is the engine of package store: segment.Store (Store),
// snowflake.LeaseStore (Leases), fencing (Guard) and idempotency keys,
// implemented once for every SQL backend. The backends differ only in
// their driver, their placeholders and a few words of syntax; those come
// in through the DB interface and a Spelling, from which NewDialect
// renders idgen's SQL (sql.go), so the reservation and lease logic, the
// part that must be right, and the SQL itself exist once. A backend
// registers a Driver, which package store opens by DSN scheme.
package sqlstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
)

// Row is the part of *sql.Row and pgx.Row the store uses.
type Row interface {
	Scan(dest ...any) error
}

// Rows is the part of *sql.Rows and pgx.Rows the store uses.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Querier runs statements, inside or outside a transaction.
type Querier interface {
	QueryRow(ctx context.Context, query string, args ...any) Row
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	Exec(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
}

// LastExecer is a transaction's Querier that can send its last
// statement together with the COMMIT, in one round trip (PostgreSQL's
// pipeline). Once ExecLast returns, the transaction is over: committed
// if err is nil; otherwise rolled back, or, for a lost connection,
// unknown, as after a failed COMMIT. InTx's fn then runs nothing more
// and returns ExecLast's error or nil.
type LastExecer interface {
	ExecLast(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
}

// lastExec returns how to run q's transaction's last statement: with
// its COMMIT if q can (LastExecer), as Exec otherwise.
func lastExec(q Querier) func(ctx context.Context, query string, args ...any) (int64, error) {
	if l, ok := q.(LastExecer); ok {
		return l.ExecLast
	}
	return q.Exec
}

// DB is a connection pool that can also run fn in one transaction. InTx
// commits when fn returns nil and rolls back otherwise, including when
// ctx is cancelled, so no row lock outlives the call.
type DB interface {
	Querier
	InTx(ctx context.Context, fn func(q Querier) error) error
}

// Dialect is the SQL text of one database, as NewDialect renders it.
// Placeholders are in the database's own style; argument order is given
// next to each statement.
type Dialect struct {
	// LockRow selects max_id, step of a tag under a row lock. Args: tag.
	LockRow string
	// Advance sets max_id. Args: new max_id, tag.
	Advance string
	// Insert creates a row. Args: tag, max_id, step, description.
	Insert string
	// Release sets max_id back if it is unchanged. Args: from, tag, to.
	Release string
	// List returns biz_tag, max_id, step, description, updated_at by tag.
	List string
	// SetStep changes the step. Args: step, tag.
	SetStep string
	// AdvanceAll adds to every row's max_id, setting a row it would
	// carry past the int64 limit to the limit, as a fence does
	// (IdentitySQL.Bump). Args: limit, n.
	AdvanceAll string
	// ListMax selects biz_tag, max_id of every row by tag.
	ListMax string
	// Witness raises a tag's max_id to what this process reserved of it,
	// never lowering it: the witness raise after a fence (Guard.witness).
	// Args: to, tag, to.
	Witness string
	// WitnessCreate creates a tag's row that a witness raise found
	// missing, at what the process reserved of it: a creation the store
	// lost (a failover during the lag). Args: tag, max_id, step.
	WitnessCreate string
	// MarkSet records a tag's mark (migration 00014): the end of the
	// range a reservation took, in its transaction, unless the fence
	// record's generation is no longer the one the reservation was
	// checked against: then it matches no row. It reads the record in a
	// statement of its own, after the row lock was granted, so a fence
	// that committed while the reservation waited for the row is seen
	// (the locking read's own subqueries may read from before it). Args:
	// tag, max_id, generation.
	MarkSet string
	// LockExtra is the select list LockRow reads beside the server's
	// identity on a guarded store: the record's generation and the tag's
	// mark (0 if none).
	LockExtra string
	// MarkRelease sets a tag's mark back with its hand-back. Args: from,
	// tag, to.
	MarkRelease string
	// MarkSelect reads a tag's mark, 0 if it has none. Args: tag.
	MarkSelect string
	// MarkLock reads a tag's mark as last committed, under a row lock,
	// and no row if it has none: a row found below the mark LockRow read
	// is checked against it, since the locking statement's subquery may
	// read from before a hand-back that committed while it waited.
	// Args: tag.
	MarkLock string
	// InsertOpaque is Insert with the row's opaque_fingerprint (migration
	// 00013), "" on a sequence table that has none (leaf_alloc). Args:
	// tag, max_id, step, description, fingerprint.
	InsertOpaque string
	// OpaqueInsert records an opaque tag's key fingerprint in tag_opaque.
	// Args: tag, fingerprint.
	OpaqueInsert string
	// OpaqueSelect returns the key fingerprint a tag's row holds ('' for
	// a plain tag, and always '' on leaf_alloc) and the one its tag_opaque
	// row holds ('' for none), and no row for a tag that does not exist.
	// Args: tag, tag.
	OpaqueSelect string
	// OpaqueList returns biz_tag and both fingerprints, as OpaqueSelect,
	// of every tag either marks opaque.
	OpaqueList string
	// IsDuplicate reports a primary-key violation.
	IsDuplicate func(error) bool
	// NoRows is the driver's "no rows" error.
	NoRows error

	// The worker_node statements of Leases. Times are Unix milliseconds.

	// WorkerSelectFree selects worker_id, lease_expires_at and
	// last_timestamp of the lowest row with min <= worker_id <= max whose
	// owner is '' or whose lease_expires_at <= now, locking it and
	// skipping rows other transactions have locked; a lapsed row a fence
	// counted (seen_generation -1) only once the fence's hold is over,
	// unless by its own owner (fence.Claimable). Args: min, max, now, 1
	// if the hold is over, the claim's owner.
	WorkerSelectFree string
	// WorkerSelectFree skips pinned rows (see WorkerSelectOne).
	//
	// WorkerTake leases a row. Args: owner, lease_expires_at,
	// last_timestamp, pinned (0 or 1), range_cap, worker_id.
	WorkerTake string
	// WorkerSelectOne selects owner, lease_expires_at, last_timestamp and
	// seen_generation of
	// one row under a row lock, for a static worker ID, whose row is
	// pinned: leased claims never take it. Args: worker_id.
	WorkerSelectOne string
	// WorkerUnpin returns a static worker ID to the leased pool. Args:
	// worker_id.
	WorkerUnpin string
	// WorkerLowestMissing selects the lowest worker ID from min to max
	// that has no row, or -1 if there is none. Args: min, min, max, max.
	WorkerLowestMissing string
	// WorkerSeed inserts rows with only worker_id set, skipping those that
	// exist. Its one %s is replaced by "(id),(id),…", written by the store.
	WorkerSeed string
	// WorkerRenew raises lease_expires_at and last_timestamp to at least
	// the arguments, never lowering either (a holder whose clock stepped
	// back must not shorten the lease a claimer sees), if worker_id, owner match and lease_expires_at >
	// now. Args: lease_expires_at, last_timestamp, worker_id, owner, now.
	WorkerRenew string
	// WorkerRelease clears owner and lease_expires_at and raises
	// last_timestamp, if worker_id and owner match. Args: last_timestamp,
	// worker_id, owner.
	WorkerRelease string
	// WorkerList selects worker_id, owner, lease_expires_at,
	// last_timestamp of every row, by worker_id.
	WorkerList string

	// The snowflake_layout statements of Leases (ClaimLayout, Layouts,
	// Relayout): the layouts a lease table's worker IDs issue IDs in, one
	// row per layout by ordinal from 0. Times are Unix milliseconds.

	// LayoutAnchor inserts a table's first record, ordinal 0, with no
	// worker IDs, unless the table has one. Args: lease_table, epoch_ms,
	// time_bits, worker_bits, sequence_bits.
	LayoutAnchor string
	// LayoutLock locks the record of ordinal 0, which every claim and
	// relayout of the table locks first, so that they run one at a time.
	// Args: lease_table.
	LayoutLock string
	// LayoutSelect selects ordinal, epoch_ms, time_bits, worker_bits,
	// sequence_bits, worker_from, worker_to, not_before and retired_at of
	// every record of a table by ordinal, as last committed (a locking
	// read, which MySQL needs for that). Args: lease_table.
	LayoutSelect string
	// LayoutList is LayoutSelect without locks, for Layouts.
	LayoutList string
	// LayoutInsert adds a record. Args: lease_table, ordinal, epoch_ms,
	// time_bits, worker_bits, sequence_bits, worker_from, worker_to,
	// not_before, retired_at.
	LayoutInsert string
	// LayoutUpdate sets every column of a record. Args: epoch_ms,
	// time_bits, worker_bits, sequence_bits, worker_from, worker_to,
	// not_before, retired_at, lease_table, ordinal.
	LayoutUpdate string
	// WorkerHeld selects worker_id, owner and lease_expires_at of every
	// worker_node row with an owner, locking them. No args.
	WorkerHeld string
	// WorkerDisown clears owner and lease_expires_at of every row, raising
	// last_timestamp to the lease's expiry. No args.
	WorkerDisown string
	// WorkerLatest selects the greatest last_timestamp or
	// lease_expires_at of any row, 0 if there is none. No args.
	WorkerLatest string

	// IsRetryable reports a deadlock, lock wait timeout or serialization
	// failure: the database rolled the transaction back, so running it
	// again is safe. Reserve and Claim retry after it. Nil means never.
	IsRetryable func(error) bool

	// Identity, if set, is how the store checks and fences its history
	// (see Guard). Nil turns fencing off.
	Identity *IdentitySQL
}

// Store is a segment.Store over any SQL backend.
type Store struct {
	retryHook
	db DB
	d  Dialect
	g  *Guard
	// lockRow is d.LockRow with the server's identity columns read
	// beside max_id and step, when g is set and LockRow has the usual
	// shape.
	lockRow string
}

// New returns a Store that runs d's statements on db.
func New(db DB, d Dialect) *Store { return &Store{db: db, d: d} }

// lockRowPrefix is how every dialect's LockRow begins; the identity
// columns go after it.
const lockRowPrefix = "SELECT max_id, step "

// NewGuarded is New with the store's identity checked by g in the
// transaction of every reservation (Reserve, Raise, Bump). A nil g
// checks nothing.
func NewGuarded(db DB, d Dialect, g *Guard) *Store {
	s := New(db, d)
	s.g = g
	if g != nil && strings.HasPrefix(s.d.LockRow, lockRowPrefix) {
		s.lockRow = "SELECT max_id, step, " + g.id.Server + ", " + s.d.LockExtra + " " + strings.TrimPrefix(s.d.LockRow, lockRowPrefix)
	}
	return s
}

// CreateTag implements segment.Store. An opaque tag's row and its
// fingerprint are written in one transaction, so that no instance can see
// the tag without knowing it is opaque. The tag starts at the store's tag
// floor above t.MaxID (see start). The transaction is retried like a
// reservation: on Galera, a creation and a fence on two nodes abort one
// another at certification.
func (s *Store) CreateTag(ctx context.Context, t segment.Tag) error {
	if err := t.Validate(); err != nil {
		return err
	}
	err := retry(ctx, s.d, &s.retryHook, "create", func() error {
		return s.db.InTx(ctx, func(q Querier) error { return s.insert(ctx, q, t) })
	})
	if err != nil && s.d.IsDuplicate(err) {
		return fmt.Errorf("%w: %q", segment.ErrTagExists, t.Name)
	}
	return wrap("create", t.Name, err)
}

// insert creates t's row at the floor (start), with its fingerprint in
// the row if it is opaque, and its tag_opaque row, which instances of
// before migration 00013 read.
func (s *Store) insert(ctx context.Context, q Querier, t segment.Tag) error {
	maxID, err := s.start(ctx, q, t.Name, t.MaxID)
	if err != nil {
		return err
	}
	if t.Opaque != "" && s.d.InsertOpaque != "" {
		_, err = q.Exec(ctx, s.d.InsertOpaque, t.Name, maxID, t.Step, t.Description, t.Opaque)
	} else {
		_, err = q.Exec(ctx, s.d.Insert, t.Name, maxID, t.Step, t.Description)
	}
	if err != nil || t.Opaque == "" {
		return err
	}
	_, err = q.Exec(ctx, s.d.OpaqueInsert, t.Name, t.Opaque)
	return err
}

// start returns where a tag created with max_id from begins, in q's
// transaction: the tag floor above it (fence.Start). It writes the
// idgen_fence row before it reads the floor, so that the row stays
// locked until the creation commits: a fence, which locks the row
// first, cannot commit between the read and the insert, so the new row
// is either there for the fence to move up or starts above the floor the
// fence wrote. A tag whose creation a failover lost, created again,
// thereby starts above every ID handed out from the lost row. Without
// fencing there is no floor.
func (s *Store) start(ctx context.Context, q Querier, name string, from int64) (int64, error) {
	if s.d.Identity == nil {
		return from, nil
	}
	if _, err := q.Exec(ctx, s.d.Identity.Create); err != nil {
		return 0, fmt.Errorf("lock idgen_fence for the creation (migration 00010): %w", err)
	}
	var floor, mark int64
	if err := q.QueryRow(ctx, s.d.Identity.TagFloor).Scan(&floor); err != nil {
		return 0, fmt.Errorf("read the tag floor: %w", err)
	}
	// A tag whose row is gone but whose mark is not (the sequence table
	// restored alone, from before the creation) starts above every range
	// reserved from the lost row.
	if err := q.QueryRow(ctx, s.d.MarkSelect, name).Scan(&mark); err != nil {
		return 0, fmt.Errorf("read the tag's mark (migration 00014): %w", err)
	}
	return max(fence.Start(fence.Record{Floor: floor}, from), mark), nil
}

// ListTags returns every tag, ordered by name.
func (s *Store) ListTags(ctx context.Context) ([]segment.Tag, error) {
	out, err := s.listRows(ctx)
	if err != nil {
		return nil, wrap("list", "", err)
	}
	return out, wrap("list", "", s.fillOpaque(ctx, out))
}

// listRows reads the sequence table, and closes its rows before
// fillOpaque's query needs a connection of its own.
func (s *Store) listRows(ctx context.Context) ([]segment.Tag, error) {
	rows, err := s.db.Query(ctx, s.d.List)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []segment.Tag
	for rows.Next() {
		var t segment.Tag
		// Tables idgen did not create may hold NULL there (Leaf's
		// update_time can be): such a row lists with a zero time.
		var updated *time.Time
		if err := rows.Scan(&t.Name, &t.MaxID, &t.Step, &t.Description, &updated); err != nil {
			return nil, err
		}
		if updated != nil {
			t.UpdatedAt = *updated
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// fillOpaque sets Opaque on the listed tags that either record marks
// opaque. A tag whose records disagree lists with its row's fingerprint,
// the one its counter was restored with; serving it is refused
// (TagOpaque).
func (s *Store) fillOpaque(ctx context.Context, tags []segment.Tag) error {
	fps, err := s.opaqueRows(ctx)
	if err != nil {
		return err
	}
	for i := range tags {
		tags[i].Opaque = fps[tags[i].Name].fingerprint()
	}
	return nil
}

// OpaqueRows returns every opaque tag, tag name → fingerprint: on
// id_sequence, the tags whose row or tag_opaque row marks them opaque
// (fillOpaque); on leaf_alloc, every tag_opaque row.
func (s *Store) OpaqueRows(ctx context.Context) (map[string]string, error) {
	fps, err := s.opaqueRows(ctx)
	if err != nil {
		return nil, wrap("opaque", "", err)
	}
	out := make(map[string]string, len(fps))
	for tag, m := range fps {
		out[tag] = m.fingerprint()
	}
	return out, nil
}

// opaqueMarks are a tag's two records of its opaque key: its row's
// opaque_fingerprint (migration 00013), and its tag_opaque row (00008).
type opaqueMarks struct{ row, table string }

// fingerprint is the tag's key: the row's, or tag_opaque's for a tag
// whose row has none, as one created by an instance of before 00013
// after the migration ran, or restored from a dump of before it: a tag
// either marks opaque is opaque, never served raw.
func (m opaqueMarks) fingerprint() string { return cmp.Or(m.row, m.table) }

// check is ErrOpaqueConflict when both records name a key and not the
// same one.
func (m opaqueMarks) check(tag string) error {
	if m.row != "" && m.table != "" && m.row != m.table {
		return fmt.Errorf("%w: tag %q: its id_sequence row names key %s and its tag_opaque row key %s; "+
			"no instance serves it until one is corrected to the key its IDs were made under (see docs/segment.md, \"Opaque tags\")",
			segment.ErrOpaqueConflict, tag, m.row, m.table)
	}
	return nil
}

func (s *Store) opaqueRows(ctx context.Context) (map[string]opaqueMarks, error) {
	rows, err := s.db.Query(ctx, s.d.OpaqueList)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	fps := map[string]opaqueMarks{}
	for rows.Next() {
		var tag string
		var m opaqueMarks
		if err := rows.Scan(&tag, &m.row, &m.table); err != nil {
			return nil, err
		}
		fps[tag] = m
	}
	return fps, rows.Err()
}

// TagOpaque returns the fingerprint of the key the tag was created under,
// "" for a plain tag, an error wrapping segment.ErrTagNotFound, or one
// wrapping segment.ErrOpaqueConflict when the tag's row and its
// tag_opaque row name different keys: what opaque.Generator asks once
// per tag.
func (s *Store) TagOpaque(ctx context.Context, tag string) (string, error) {
	var m opaqueMarks
	err := s.db.QueryRow(ctx, s.d.OpaqueSelect, tag, tag).Scan(&m.row, &m.table)
	if errors.Is(err, s.d.NoRows) {
		return "", fmt.Errorf("%w: %q", segment.ErrTagNotFound, tag)
	}
	if err != nil {
		return "", wrap("opaque", tag, err)
	}
	if err := m.check(tag); err != nil {
		return "", err
	}
	return m.fingerprint(), nil
}

// SetStep changes a tag's configured step. Allocators pick it up at their
// next reservation.
func (s *Store) SetStep(ctx context.Context, tag string, step int64) error {
	if step < 1 || step > math.MaxInt32 {
		return fmt.Errorf("%w: step %d", segment.ErrInvalidStep, step)
	}
	n, err := s.db.Exec(ctx, s.d.SetStep, step, tag)
	if err != nil {
		return wrap("set step", tag, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", segment.ErrTagNotFound, tag)
	}
	return nil
}

// wrap names the operation and tag, and leaves the segment sentinels and
// the driver's error reachable with errors.Is and errors.As.
func wrap(op, tag string, err error) error {
	if err == nil {
		return nil
	}
	if isSentinel(err) {
		return err
	}
	if tag == "" {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	return fmt.Errorf("store: %s %q: %w", op, tag, err)
}

func isSentinel(err error) bool {
	for _, s := range []error{segment.ErrTagNotFound, segment.ErrTagExists, segment.ErrExhausted, segment.ErrInvalidStep, segment.ErrInvalidTag} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
