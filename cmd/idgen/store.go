package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idgen/idgen/fence"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store"
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
	// TagOpaque tells opaque tags from plain ones (opaque.Tags).
	TagOpaque(ctx context.Context, tag string) (string, error)
	Bump(ctx context.Context, tag string, n int64) (int64, error)
	// Import creates or raises tags in one transaction (idgen import).
	Import(ctx context.Context, tags []segment.Tag) (before []int64, err error)
	Migrate(ctx context.Context, logger *slog.Logger) (int64, error)
	Ping(ctx context.Context) error
	Close() error
	// Leases is the snowflake worker lease table in the same database.
	Leases() snowflake.LeaseTable
	// ObserveRetries counts the reservations and worker-ID claims retried
	// after a deadlock or serialization failure.
	ObserveRetries(f func(op string))
	// The store's fencing against a changed history (package fence).
	ConfigureFence(c fence.Config, log *slog.Logger) error
	ObserveFences(f func(fence.Event))
	CheckIdentity(ctx context.Context) error
	Identity(ctx context.Context) (fence.Identity, fence.Record, error)
	// Idempotency is the idempotency key table in the same database.
	Idempotency() idempotency.Store
}

// The store kinds a --store DSN can name.
const (
	kindSQLite   = "sqlite"
	kindPostgres = "postgres"
	kindMySQL    = "mysql"
)

// storeHelp is the DSN forms --store accepts, for every message that
// refuses one.
const storeHelp = "use sqlite://PATH (sqlite://./idgen.db, sqlite:///var/lib/idgen/idgen.db), " +
	"postgres://user:pass@host:5432/db (or PostgreSQL's key=value form, host=… dbname=…), or mysql://user:pass@host:3306/db"

// libpqKeys are the keywords that start PostgreSQL's key=value DSN form.
var libpqKeys = map[string]bool{"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true,
	"password": true, "passfile": true, "sslmode": true, "connect_timeout": true, "application_name": true,
	"options": true, "service": true, "target_session_attrs": true, "sslrootcert": true, "sslcert": true, "sslkey": true}

// storeKind says which backend a DSN names, without connecting. A DSN
// must say so: a scheme (sqlite://, file://, postgres://, postgresql://,
// mysql://), or PostgreSQL's key=value form, which store/postgres
// documents. Anything else is refused rather than taken for a SQLite
// path: a mistyped DSN would otherwise create a file named after it,
// password included, and serve from an empty database.
func storeKind(dsn string) (string, error) {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		if isKeyValueDSN(dsn) {
			return kindPostgres, nil
		}
		if _, err := sqlite.Path(dsn); errors.Is(err, sqlite.ErrInMemory) {
			return "", err
		}
		for _, s := range []string{"sqlite:", "file:", "postgres:", "postgresql:", "mysql:"} {
			if strings.HasPrefix(dsn, s) {
				return "", fmt.Errorf("%s needs :// after it: %s", strings.TrimSuffix(s, ":"), storeHelp)
			}
		}
		// The DSN itself is not repeated: it may hold a password.
		return "", errors.New("the DSN has no scheme: " + storeHelp)
	}
	switch scheme {
	case "sqlite", "file":
		_, err := sqlitePath(dsn)
		return kindSQLite, err
	case "postgres", "postgresql":
		return kindPostgres, nil
	case "mysql":
		_, err := mysql.ParseDSN(dsn)
		return kindMySQL, err
	}
	return "", fmt.Errorf("unsupported store %q: %s", scheme+"://", storeHelp)
}

// isKeyValueDSN reports whether dsn is in PostgreSQL's key=value form:
// its first word is a libpq keyword followed by =.
func isKeyValueDSN(dsn string) bool {
	key, _, ok := strings.Cut(strings.TrimSpace(dsn), "=")
	return ok && libpqKeys[strings.TrimSpace(key)]
}

// sqlitePath is the file of a sqlite:// or file:// DSN.
func sqlitePath(dsn string) (string, error) {
	return sqlite.Path(strings.TrimPrefix(dsn, "file://"))
}

// checkStoreDSN checks a DSN without connecting.
func checkStoreDSN(dsn string) error {
	_, err := storeKind(dsn)
	return err
}

// storeFileMissing reports whether dsn names a SQLite file that does not
// exist yet, and its path.
func storeFileMissing(dsn string) (string, bool) {
	if kind, err := storeKind(dsn); err != nil || kind != kindSQLite {
		return "", false
	}
	path, err := sqlitePath(dsn)
	if err != nil {
		return "", false
	}
	_, err = os.Stat(path)
	return path, errors.Is(err, fs.ErrNotExist)
}

// requireStoreFile refuses a SQLite DSN whose file does not exist, for
// the commands that only read or change what is there: a typo must not
// create an empty store beside the real one.
func requireStoreFile(dsn string) error {
	if path, missing := storeFileMissing(dsn); missing {
		return fmt.Errorf("--store: no SQLite file at %s: check the path (idgen migrate, tag add and serve create a new store)", path)
	}
	return nil
}

// openStore picks the backend from the DSN (see storeKind).
func openStore(ctx context.Context, dsn string, table string) (backend, error) {
	kind, err := storeKind(dsn)
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	switch kind {
	case kindSQLite:
		return sqlite.OpenTable(ctx, strings.TrimPrefix(dsn, "file://"), table)
	case kindPostgres:
		return postgres.OpenTable(ctx, dsn, table)
	default:
		return mysql.OpenTable(ctx, dsn, table)
	}
}

// openFlagStore opens the store named by the --store and
// --sequence-table flags.
func openFlagStore(ctx context.Context, cmd *cobra.Command) (backend, error) {
	name, _ := cmd.Flags().GetString("sequence-table")
	if err := store.CheckTable(name); err != nil {
		return nil, fmt.Errorf("--sequence-table: %w", err)
	}
	return openStore(ctx, storeDSN(cmd), name)
}
