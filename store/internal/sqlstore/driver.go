package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/idgen/idgen/migrations"
)

// Conn is one open database, as a Driver hands it to package store,
// which builds the one Store type over it.
type Conn struct {
	// DB is the pool the engine runs its statements on.
	DB DB
	// SQL is the same database through database/sql, for migrations,
	// tools and tests. It is the Conn's own: Close closes it.
	SQL *sql.DB
	// Spelling is how the database writes idgen's SQL (see NewDialect).
	Spelling Spelling
	// Migrations names the database's migration files.
	Migrations migrations.Dialect
	// Guard is what the store knows of its history at start, and where
	// it keeps it (SQLite's sidecar file); its Fence is the default.
	Guard GuardOptions
	// NoFence, if set, says why the store runs without fencing: a server
	// that refused the identity query at Open.
	NoFence error
	// OpenIdem, if set, opens the pools of the idempotency key store, on
	// its first use: durable for the answers, lazy for the rest (see
	// Idempotency), and what closes them. A nil durable means both run on
	// DB. Nil: both run on DB.
	OpenIdem func() (durable, lazy DB, closeIdem func())
	// Listen, if set, opens a connection of its own that hears the
	// notifications sent on channel (Spelling.Notify): how waiters for a
	// lock learn at once that it was freed. Nil: they poll.
	Listen func(ctx context.Context, channel string) (Listener, error)
	// Close closes the database's pools.
	Close func() error
}

// Listener is one connection listening for notifications.
type Listener interface {
	// Next waits for the next notification and returns its payload, or
	// an error once ctx ends or the connection is lost.
	Next(ctx context.Context) (string, error)
	// Close closes the connection.
	Close() error
}

// Driver opens the databases of one kind: what store/sqlite,
// store/postgres and store/mysql register, as database/sql's drivers do.
type Driver struct {
	// Name names the driver: "sqlite", "postgres", "mysql".
	Name string
	// Schemes are the DSN schemes (before "://") the driver takes.
	Schemes []string
	// Bare, if set, reports whether a DSN without a scheme is the
	// driver's (PostgreSQL's key=value form), or an error saying why it
	// cannot be anyone's.
	Bare func(dsn string) (bool, error)
	// Check checks a DSN without connecting.
	Check func(dsn string) error
	// Open connects to the database dsn names and checks the connection
	// once.
	Open func(ctx context.Context, dsn string) (*Conn, error)
}

// drivers is the registry Register fills from the backends' init
// functions and Lookup reads: database/sql's model.
var drivers struct {
	mu   sync.RWMutex
	list []Driver
}

// Register makes a driver available to package store. It panics if the
// name or one of the schemes is taken, as sql.Register does: two
// backends claiming one scheme is a build mistake.
func Register(d Driver) {
	drivers.mu.Lock()
	defer drivers.mu.Unlock()
	for _, o := range drivers.list {
		if o.Name == d.Name || slices.ContainsFunc(d.Schemes, func(s string) bool { return slices.Contains(o.Schemes, s) }) {
			panic("sqlstore: Register called twice for driver " + d.Name)
		}
	}
	drivers.list = append(drivers.list, d)
}

// Help is the DSN forms a store takes, for every message that refuses
// one.
const Help = "use sqlite://PATH (sqlite://./idgen.db, sqlite:///var/lib/idgen/idgen.db), " +
	"postgres://user:pass@host:5432/db (or PostgreSQL's key=value form, host=… dbname=…), or mysql://user:pass@host:3306/db"

// Named returns the registered driver called name.
func Named(name string) (Driver, error) {
	drivers.mu.RLock()
	defer drivers.mu.RUnlock()
	for _, d := range drivers.list {
		if d.Name == name {
			return d, nil
		}
	}
	return Driver{}, fmt.Errorf("no store driver %q: import its package (github.com/idgen/idgen/store/%s)", name, name)
}

// Lookup returns the driver a DSN names, without connecting. A DSN must
// say which: a scheme, or a form a driver claims (Bare). Anything else is
// refused rather than taken for a SQLite path: a mistyped DSN would
// otherwise create a file named after it, password included, and serve
// from an empty database. The DSN itself is never repeated in an error:
// it may hold a password.
func Lookup(dsn string) (Driver, error) {
	drivers.mu.RLock()
	defer drivers.mu.RUnlock()
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		for _, d := range drivers.list {
			if d.Bare == nil {
				continue
			}
			if mine, err := d.Bare(dsn); err != nil || mine {
				return d, err
			}
		}
		for _, s := range []string{"sqlite:", "file:", "postgres:", "postgresql:", "mysql:"} {
			if strings.HasPrefix(dsn, s) {
				return Driver{}, fmt.Errorf("%s needs :// after it: %s", strings.TrimSuffix(s, ":"), Help)
			}
		}
		return Driver{}, errors.New("the DSN has no scheme: " + Help)
	}
	for _, d := range drivers.list {
		if slices.Contains(d.Schemes, scheme) {
			return d, nil
		}
	}
	if pkg, ok := backends[scheme]; ok {
		return Driver{}, fmt.Errorf("no driver for %s:// is registered: import github.com/idgen/idgen/store/%s", scheme, pkg)
	}
	return Driver{}, fmt.Errorf("unsupported store %q: %s", scheme+"://", Help)
}

// backends names the package of each scheme idgen has a backend for.
var backends = map[string]string{"sqlite": "sqlite", "file": "sqlite", "postgres": "postgres", "postgresql": "postgres", "mysql": "mysql"}
