package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"

	"github.com/idgen/idgen/store"
)

// Connectors wraps the connector of a store's pool: a test seam, so that
// a simulator can run the real store over a database/sql layer that
// injects faults (a statement that fails, a commit whose answer is lost)
// beneath it, as internal/sim does. Production code calls Open.
type Connectors func(driver.Connector) driver.Connector

// OpenWrapped is Open with every connection of the store's own pool made
// through wrap (see Connectors). The idempotency key pools are not
// wrapped.
func OpenWrapped(ctx context.Context, dsn string, wrap Connectors) (*Store, error) {
	return store.Open(context.WithValue(ctx, wrapKey{}, wrap), dsn, store.Options{Driver: "sqlite"})
}

type wrapKey struct{}

// dsnConnector is the connector database/sql builds for a driver without
// one of its own: every connection is drv.Open(dsn).
type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// sqlOpen is sql.Open("sqlite", dsn), through the wrap ctx carries if
// OpenWrapped put one there.
func sqlOpen(ctx context.Context, dsn string) (*sql.DB, error) {
	wrap, _ := ctx.Value(wrapKey{}).(Connectors)
	db, err := sql.Open("sqlite", dsn)
	if err != nil || wrap == nil {
		return db, err
	}
	drv := db.Driver()
	_ = db.Close() // it opened no connection yet
	return sql.OpenDB(wrap(dsnConnector{drv: drv, dsn: dsn})), nil
}
