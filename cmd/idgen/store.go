package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/idgen/idgen/internal/sqlstore"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/mysql"
	"github.com/idgen/idgen/store/postgres"
	"github.com/idgen/idgen/store/sqlite"
)

// backend is what the binary needs from a store package.
type backend interface {
	segment.Store
	ListTags(ctx context.Context) ([]segment.Tag, error)
	SetStep(ctx context.Context, tag string, step int64) error
	Raise(ctx context.Context, tag string, to int64) (bool, error)
	Bump(ctx context.Context, tag string, n int64) (int64, error)
	Migrate(ctx context.Context, logger *slog.Logger) (int64, error)
	Ping(ctx context.Context) error
	Close() error
	// Leases is the snowflake worker lease table in the same database.
	Leases() *sqlstore.Leases
}

// checkStoreDSN checks a DSN without connecting.
func checkStoreDSN(dsn string) error {
	switch scheme := storeScheme(dsn); scheme {
	case "sqlite", "file", "postgres", "postgresql":
		return nil
	case "mysql":
		_, err := mysql.ParseDSN(dsn)
		return err
	default:
		return fmt.Errorf("unsupported store %q: use sqlite://PATH, postgres://… or mysql://…", scheme+"://")
	}
}

func storeScheme(dsn string) string {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		return "sqlite"
	}
	return scheme
}

// openStore picks the backend from the DSN's scheme. A DSN without a
// scheme is a SQLite file path.
func openStore(ctx context.Context, dsn string) (backend, error) {
	switch scheme := storeScheme(dsn); scheme {
	case "sqlite", "file":
		return sqlite.Open(ctx, strings.TrimPrefix(dsn, "file://"))
	case "postgres", "postgresql":
		return postgres.Open(ctx, dsn)
	case "mysql":
		return mysql.Open(ctx, dsn)
	default:
		return nil, fmt.Errorf("unsupported store %q: use sqlite://PATH, postgres://… or mysql://…", scheme+"://")
	}
}
