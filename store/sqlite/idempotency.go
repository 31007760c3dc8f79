package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/internal/sqlstore"
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
// idempotency_key table of migration 9) in the same database, for
// idempotency.New. Answers are recorded on the Store's pool, with
// synchronous FULL; the other statements run on a second pool of the
// same file with synchronous NORMAL, whose commits reach the disk with
// the next FULL one (one WAL file), since losing them in a crash is
// harmless (see sqlstore.Idempotency). Close closes both.
func (s *Store) Idempotency() idempotency.Store {
	s.idem.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if db, err := openFile(ctx, s.path, "NORMAL"); err == nil {
			s.idem.lazy = db
		}
	})
	var lazy sqlstore.DB
	if s.idem.lazy != nil {
		lazy = sqlstore.StdDB{DB: s.idem.lazy}
	}
	return sqlstore.NewIdempotency(sqlstore.StdDB{DB: s.db}, lazy, dialect, idemStatements)
}

// idemPool holds the lazy pool of Idempotency, opened on first use.
type idemPool struct {
	once sync.Once
	lazy *sql.DB
}

func (p *idemPool) close() {
	p.once.Do(func() {}) // none opened after Close
	if p.lazy != nil {
		_ = p.lazy.Close()
	}
}
