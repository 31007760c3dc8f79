// Package migrations holds idgen's schema for each supported database and
// applies it with goose. The SQL files are embedded, so a binary carries
// its own schema and `idgen migrate` needs no files on disk.
//
// Up is safe when several instances start at once: on PostgreSQL it holds
// goose's advisory-lock session locker, on MySQL goose's lock table, and
// SQLite serialises writers on its own.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed sqlite/*.sql postgres/*.sql mysql/*.sql
var files embed.FS

// Dialect names a supported database.
type Dialect string

// The supported dialects; each is also the name of its folder here.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
	MySQL    Dialect = "mysql"
)

// Up applies every pending migration of dialect d to db and returns the
// schema version reached.
func Up(ctx context.Context, db *sql.DB, d Dialect, logger *slog.Logger) (int64, error) {
	return up(ctx, db, d, logger)
}

func up(ctx context.Context, db *sql.DB, d Dialect, logger *slog.Logger, extra ...goose.ProviderOption) (int64, error) {
	p, err := provider(db, d, logger, extra...)
	if err != nil {
		return 0, err
	}
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("migrations: apply %s schema: %w", d, err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: read %s schema version: %w", d, err)
	}
	return v, nil
}

func provider(db *sql.DB, d Dialect, logger *slog.Logger, extra ...goose.ProviderOption) (*goose.Provider, error) {
	sub, err := fs.Sub(files, string(d))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var gd goose.Dialect
	var opts []goose.ProviderOption
	switch d {
	case SQLite:
		gd = goose.DialectSQLite3
	case Postgres:
		gd = goose.DialectPostgres
		l, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(l))
	case MySQL:
		gd = goose.DialectMySQL
		l, err := lock.NewMySQLTableLocker()
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		opts = append(opts, goose.WithLocker(l))
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q", d)
	}
	if logger != nil {
		opts = append(opts, goose.WithSlog(logger))
	}
	// A database that served from a shared sequence table (UpShared)
	// lacks the id_sequence migrations below its version; they are the
	// only ones that can be missing, and are applied first.
	opts = append(opts, goose.WithAllowOutofOrder(true))
	opts = append(opts, extra...)
	p, err := goose.NewProvider(gd, db, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}
