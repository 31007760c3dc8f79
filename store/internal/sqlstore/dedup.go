package sqlstore

import (
	"context"
	"time"

	"github.com/idgen/idgen/idempotency/dedup"
)

// DedupStatements are the idgen_dedup statements of one database
// (migration 00018). Expiries are Unix milliseconds.
type DedupStatements struct {
	// Mark inserts a record unless one with its group and key exists.
	// Args: group, key, expires_at.
	Mark string
	// Sweep deletes up to limit records expired at now. Args: now,
	// limit.
	Sweep string
}

// NewDedupStatements renders the idgen_dedup statements for sp.
func NewDedupStatements(sp Spelling) (DedupStatements, error) {
	r := renderer{sp: sp, t: IDSequence}
	s := DedupStatements{
		// Insert-if-absent, not a plain INSERT that fails on the key: a
		// failed statement aborts a PostgreSQL transaction, and the
		// caller's must stay usable after a duplicate.
		Mark:  r.sql(`{{ins}} INTO idgen_dedup (dedup_group, message_key, expires_at) VALUES (?, ?, ?){{conflict "dedup_group, message_key"}}`),
		Sweep: r.sql(sp.DedupSweep),
	}
	return s, r.err
}

// Dedup is a dedup.Store over any SQL backend: the idgen_dedup table.
// Mark runs in the caller's transaction; Sweep on the store's pool.
type Dedup struct {
	retryHook
	db DB
	d  Dialect
	s  DedupStatements
}

var _ dedup.Store = (*Dedup)(nil)

// NewDedup returns the dedup store of db, with d's error tests.
func NewDedup(db DB, d Dialect, s DedupStatements) *Dedup {
	return &Dedup{db: db, d: d, s: s}
}

// Mark implements dedup.Store. It is not retried: an error may have
// aborted the caller's transaction, which only the caller can roll
// back.
func (s *Dedup) Mark(ctx context.Context, tx dedup.Tx, group, key string, expiresAt time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, s.s.Mark, group, key, expiresAt.UnixMilli())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Sweep implements dedup.Store.
func (s *Dedup) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	var n int64
	err := retry(ctx, s.d, &s.retryHook, "dedup", func() (err error) {
		n, err = s.db.Exec(ctx, s.s.Sweep, now.UnixMilli(), limit)
		return err
	})
	return int(n), err
}
