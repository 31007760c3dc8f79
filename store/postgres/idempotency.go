package postgres

import (
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/internal/sqlstore"
)

// SKIP LOCKED lets two instances sweep at once without waiting for
// each other's batches.
var idemStatements = sqlstore.IdemStatements{
	Insert: `INSERT INTO idempotency_key (scope, idem_key, fingerprint, owner, body, locked_until, expires_at)
		VALUES ($1, $2, $3, $4, '', $5, $6) ON CONFLICT (scope, idem_key) DO NOTHING`,
	Get: `SELECT fingerprint, owner, status, content_type, body, locked_until, expires_at FROM idempotency_key WHERE scope = $1 AND idem_key = $2`,
	TakeOver: `UPDATE idempotency_key SET fingerprint = $1, owner = $2, status = 0, content_type = '', body = '', locked_until = $3, expires_at = $4
		WHERE scope = $5 AND idem_key = $6 AND owner = $7 AND (expires_at <= $8 OR (status = 0 AND locked_until <= $9))`,
	Complete: `UPDATE idempotency_key SET status = $1, content_type = $2, body = $3 WHERE scope = $4 AND idem_key = $5 AND owner = $6 AND status = 0`,
	Delete:   `DELETE FROM idempotency_key WHERE scope = $1 AND idem_key = $2 AND owner = $3 AND status = 0`,
	Sweep: `DELETE FROM idempotency_key WHERE (scope, idem_key) IN
		(SELECT scope, idem_key FROM idempotency_key WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	Count: `SELECT scope, COUNT(*) FROM idempotency_key WHERE expires_at > $1 GROUP BY scope`,
}

// Idempotency returns the store of idempotency keys (the
// idempotency_key table of migration 9) in the same database, for
// idempotency.New. It shares the Store's pool.
func (s *Store) Idempotency() idempotency.Store {
	return sqlstore.NewIdempotency(poolDB{s.pool}, dialect, idemStatements)
}
