package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/internal/sqlstore"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
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
	Leases() snowflake.LeaseTable
	// ObserveRetries counts the reservations and worker-ID claims retried
	// after a deadlock or serialization failure.
	ObserveRetries(f func(op string))
	// Idempotency is the idempotency key table in the same database.
	Idempotency() idempotency.Store
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
func openStore(ctx context.Context, dsn string, table sqlstore.SequenceTable) (backend, error) {
	switch scheme := storeScheme(dsn); scheme {
	case "sqlite", "file":
		return sqlite.OpenTable(ctx, strings.TrimPrefix(dsn, "file://"), table.Name)
	case "postgres", "postgresql":
		return postgres.OpenTable(ctx, dsn, table.Name)
	case "mysql":
		return mysql.OpenTable(ctx, dsn, table.Name)
	default:
		return nil, fmt.Errorf("unsupported store %q: use sqlite://PATH, postgres://… or mysql://…", scheme+"://")
	}
}

// openFlagStore opens the store named by the --store and
// --sequence-table flags.
func openFlagStore(ctx context.Context, cmd *cobra.Command) (backend, error) {
	name, _ := cmd.Flags().GetString("sequence-table")
	table, err := sqlstore.ParseSequenceTable(name)
	if err != nil {
		return nil, fmt.Errorf("--sequence-table: %w", err)
	}
	return openStore(ctx, storeDSN(cmd), table)
}
