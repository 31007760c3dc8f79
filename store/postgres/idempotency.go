package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idgen/idgen/store/internal/sqlstore"
)

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
