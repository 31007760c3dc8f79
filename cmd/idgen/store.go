package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/idgen/idgen/store"
	_ "github.com/idgen/idgen/store/mysql"    // the mysql:// driver
	_ "github.com/idgen/idgen/store/postgres" // the postgres:// driver
	"github.com/idgen/idgen/store/sqlite"
)

// checkStoreDSN checks a DSN without connecting.
func checkStoreDSN(dsn string) error { return store.CheckDSN(dsn) }

// storeFileMissing reports whether dsn names a SQLite file that does not
// exist yet, and its path.
func storeFileMissing(dsn string) (string, bool) {
	if driver, err := store.Driver(dsn); err != nil || driver != "sqlite" {
		return "", false
	}
	path, err := sqlite.Path(dsn)
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

// openStore opens the store dsn names, with segments in table (see
// store.Driver for the DSNs it takes).
func openStore(ctx context.Context, dsn, table string) (*store.Store, error) {
	if err := store.CheckDSN(dsn); err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	return store.Open(ctx, dsn, store.Options{Table: table})
}

// openFlagStore opens the store named by the --store and
// --sequence-table flags.
func openFlagStore(ctx context.Context, cmd *cobra.Command) (*store.Store, error) {
	name, _ := cmd.Flags().GetString("sequence-table")
	if err := store.CheckTable(name); err != nil {
		return nil, fmt.Errorf("--sequence-table: %w", err)
	}
	return openStore(ctx, storeDSN(cmd), name)
}
