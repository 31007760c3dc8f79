package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/idgen/idgen/store/storetest"
)

func TestStore_Locks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idgen.db")
	storetest.Locks(t, func(t *testing.T) storetest.Store { return open(t, path) })
}

func TestStore_LockTokens(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idgen.db")
	storetest.LockTokens(t, func(t *testing.T) storetest.Store { return open(t, path) })
}
