package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

var idemStatements = sqlstore.IdemStatements{
	Insert: `INSERT INTO idempotency_key (scope, idem_key, fingerprint, owner, body, locked_until, expires_at)
		VALUES (?, ?, ?, ?, '', ?, ?) ON CONFLICT (scope, idem_key) DO NOTHING`,
	Get: `SELECT fingerprint, owner, status, content_type, body, locked_until, expires_at FROM idempotency_key WHERE scope = ? AND idem_key = ?`,
	TakeOver: `UPDATE idempotency_key SET fingerprint = ?, owner = ?, status = 0, content_type = '', body = '', locked_until = ?, expires_at = ?
		WHERE scope = ? AND idem_key = ? AND owner = ? AND (expires_at <= ? OR (status = 0 AND locked_until <= ?))`,
	Complete: `UPDATE idempotency_key SET status = ?, content_type = ?, body = ? WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 0`,
	Delete:   `DELETE FROM idempotency_key WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 0`,
	Sweep:    `DELETE FROM idempotency_key WHERE rowid IN (SELECT rowid FROM idempotency_key WHERE expires_at <= ? LIMIT ?)`,
	Count:    `SELECT scope, COUNT(*) FROM idempotency_key WHERE expires_at > ? GROUP BY scope`,
}

// Idempotency returns the store of idempotency keys (the
// idempotency_key table of migration 9) in the same file, for
// idempotency.New. It runs on two pools of its own with one connection
// each, so that keyed requests queue for SQLite's one write lock in Go,
// in order, rather than poll for it against each other (busy_timeout)
// and time out under load: answers are recorded with synchronous FULL;
// the other statements run with synchronous NORMAL, whose commits reach
// the disk with the next FULL one (one WAL file), since losing them in a
// crash is harmless (see sqlstore.Idempotency). If the file cannot be
// opened again, it falls back to the Store's pool. Close closes both.
func (s *Store) Idempotency() idempotency.Store {
	s.idem.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		durable, err1 := openFile(ctx, s.path, "FULL")
		lazy, err2 := openFile(ctx, s.path, "NORMAL")
		if err1 != nil || err2 != nil {
			for _, db := range []*sql.DB{durable, lazy} {
				if db != nil {
					_ = db.Close()
				}
			}
			return
		}
		for _, db := range []*sql.DB{durable, lazy} {
			db.SetMaxOpenConns(1)
		}
		s.idem.durable, s.idem.lazy = durable, lazy
	})
	if s.idem.durable == nil {
		return sqlstore.NewIdempotency(sqlstore.StdDB{DB: s.db}, nil, dialect, idemStatements)
	}
	return sqlstore.NewIdempotency(sqlstore.StdDB{DB: s.idem.durable}, sqlstore.StdDB{DB: s.idem.lazy}, dialect, idemStatements)
}

// idemPool holds the pools of Idempotency, opened on first use.
type idemPool struct {
	once          sync.Once
	durable, lazy *sql.DB
}

func (p *idemPool) close() {
	p.once.Do(func() {}) // none opened after Close
	for _, db := range []*sql.DB{p.lazy, p.durable} {
		if db != nil {
			_ = db.Close()
		}
	}
}
