package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idgen/idgen/store/internal/sqlstore"
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

// openIdem opens the second pool of the idempotency key store, with
// synchronous_commit off: its statements' loss in a crash is harmless
// (see store.Store.Idempotency). Answers are recorded on the Store's
// pool. On an engine that refuses the setting both share the Store's
// pool.
func openIdem(pool *pgxpool.Pool) (durable, lazy sqlstore.DB, closeIdem func()) {
	cfg := pool.Config()
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	cfg.MinConns = 0 // MaxConns as the Store's: every keyed request starts here
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, nil, nil
	}
	return poolDB{pool}, poolDB{p}, p.Close
}
