package sqlstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/idgen/idgen/idempotency"
)

// IdemStatements are the idempotency_key statements of one database.
// Times are Unix milliseconds from the callers' clocks; status 0 marks
// a row in flight.
type IdemStatements struct {
	// Insert adds a row unless one with its scope and key exists.
	// Args: scope, key, fingerprint, owner, locked_until, expires_at.
	Insert string
	// Get selects fingerprint, owner, status, content_type, body,
	// locked_until, expires_at. Args: scope, key.
	Get string
	// TakeOver overwrites a row whose owner matches and that is expired
	// or in flight past its lock, back to in flight. Args: fingerprint,
	// owner, locked_until, expires_at, scope, key, previous owner, now,
	// now.
	TakeOver string
	// Complete records the answer if the row is in flight and owned.
	// Args: status, content_type, body, scope, key, owner.
	Complete string
	// Delete removes an in-flight owned row. Args: scope, key, owner.
	Delete string
	// Renew moves the lock of an in-flight owned row. Args:
	// locked_until, scope, key, owner. Empty: NewIdempotency renders
	// renewSQL in the placeholders of Delete.
	Renew string
	// Sweep deletes up to limit rows expired at now. Args: now, limit.
	Sweep string
	// Count selects scope, COUNT(*) of rows not expired. Args: now.
	Count string
	// CountScope selects COUNT(*) of one scope's rows not expired.
	// Args: scope, now.
	CountScope string
	// CountExpired selects COUNT(*) of rows expired. Args: now.
	CountExpired string
}

// Idempotency is an idempotency.Store over any SQL backend: the
// idempotency_key table. Every method is one statement, so it needs no
// transaction: Insert is insert-if-absent, and the others compare the
// owner in their WHERE clause.
//
// Only Complete and Renew must be durable when they return: an answer
// is handed out after Complete, and must then survive a crash (for
// Renew, see there). Insert, TakeOver, Delete and
// Sweep run on lazy, a pool whose commits may return before they reach
// the disk (PostgreSQL's synchronous_commit off, SQLite's synchronous
// NORMAL in WAL mode). Losing one of them in a crash is harmless: the
// server hands nothing out on the strength of them, and the next
// durable commit, the Complete that follows, flushes the log up to
// itself and so every lazy commit before it. That saves a keyed request
// one of its two disk flushes.
type Idempotency struct {
	retryHook
	db, lazy DB
	d        Dialect
	s        IdemStatements
}

var _ idempotency.Store = (*Idempotency)(nil)

// NewIdempotency returns the key store of db, with d's error tests.
// lazy is db or a pool on the same database whose commits need not be
// durable when they return (see Idempotency); nil means db.
func NewIdempotency(db, lazy DB, d Dialect, s IdemStatements) *Idempotency {
	if lazy == nil {
		lazy = db
	}
	if s.Renew == "" {
		s.Renew = renewSQL
		if strings.Contains(s.Delete, "$1") {
			s.Renew = number(renewSQL)
		}
	}
	return &Idempotency{db: db, lazy: lazy, d: d, s: s}
}

// exec runs one statement on db, again after a deadlock (INSERT IGNORE
// of one key from two sessions can deadlock on InnoDB).
func (s *Idempotency) exec(ctx context.Context, db DB, q string, args ...any) (int64, error) {
	var n int64
	err := retry(ctx, s.d, &s.retryHook, "idempotency", func() (err error) {
		n, err = db.Exec(ctx, q, args...)
		return err
	})
	return n, err
}

// Insert implements idempotency.Store.
func (s *Idempotency) Insert(ctx context.Context, r idempotency.Record) (bool, error) {
	n, err := s.exec(ctx, s.lazy, s.s.Insert, r.Scope, r.Key, r.Fingerprint, r.Owner, r.LockedUntil.UnixMilli(), r.ExpiresAt.UnixMilli())
	return n == 1, err
}

// Get implements idempotency.Store.
func (s *Idempotency) Get(ctx context.Context, scope, key string) (idempotency.Record, bool, error) {
	r := idempotency.Record{Scope: scope, Key: key}
	var locked, expires int64
	err := s.db.QueryRow(ctx, s.s.Get, scope, key).Scan(&r.Fingerprint, &r.Owner, &r.Status, &r.ContentType, &r.Body, &locked, &expires)
	if errors.Is(err, s.d.NoRows) {
		return idempotency.Record{}, false, nil
	}
	if err != nil {
		return idempotency.Record{}, false, err
	}
	r.LockedUntil, r.ExpiresAt = time.UnixMilli(locked), time.UnixMilli(expires)
	return r, true, nil
}

// TakeOver implements idempotency.Store.
func (s *Idempotency) TakeOver(ctx context.Context, r idempotency.Record, prevOwner string, now time.Time) (bool, error) {
	ms := now.UnixMilli()
	n, err := s.exec(ctx, s.lazy, s.s.TakeOver, r.Fingerprint, r.Owner, r.LockedUntil.UnixMilli(), r.ExpiresAt.UnixMilli(),
		r.Scope, r.Key, prevOwner, ms, ms)
	return n == 1, err
}

// Complete implements idempotency.Store.
func (s *Idempotency) Complete(ctx context.Context, scope, key, owner string, status int, contentType string, body []byte) (bool, error) {
	n, err := s.exec(ctx, s.db, s.s.Complete, status, contentType, body, scope, key, owner)
	return n == 1, err
}

// renewSQL is IdemStatements.Renew, the same on every database but for
// its placeholders.
const renewSQL = `UPDATE idempotency_key SET locked_until = ? WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 0`

// Renew implements idempotency.Store. It is durable, unlike the other
// writes of a key in flight: the handler keeps running on the strength
// of it, and a renewal lost in a crash would let a retry take the key
// over while the handler still runs.
func (s *Idempotency) Renew(ctx context.Context, scope, key, owner string, lockedUntil time.Time) (bool, error) {
	n, err := s.exec(ctx, s.db, s.s.Renew, lockedUntil.UnixMilli(), scope, key, owner)
	return n == 1, err
}

// Delete implements idempotency.Store.
func (s *Idempotency) Delete(ctx context.Context, scope, key, owner string) error {
	_, err := s.exec(ctx, s.lazy, s.s.Delete, scope, key, owner)
	return err
}

// Sweep implements idempotency.Store.
func (s *Idempotency) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	n, err := s.exec(ctx, s.lazy, s.s.Sweep, now.UnixMilli(), limit)
	return int(n), err
}

// Count implements idempotency.Store.
func (s *Idempotency) Count(ctx context.Context, now time.Time) (map[string]int64, error) {
	rows, err := s.db.Query(ctx, s.s.Count, now.UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var scope string
		var n int64
		if err := rows.Scan(&scope, &n); err != nil {
			return nil, err
		}
		out[scope] = n
	}
	return out, rows.Err()
}

// CountScope implements idempotency.Store.
func (s *Idempotency) CountScope(ctx context.Context, scope string, now time.Time) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, s.s.CountScope, scope, now.UnixMilli()).Scan(&n)
	return n, err
}

// CountExpired implements idempotency.Store.
func (s *Idempotency) CountExpired(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, s.s.CountExpired, now.UnixMilli()).Scan(&n)
	return n, err
}
