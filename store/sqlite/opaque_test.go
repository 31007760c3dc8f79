package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/idgen/idgen/store/storetest"
)

func TestStore_OpaqueRecords(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idgen.db")
	storetest.OpaqueRecords(t, func(t *testing.T) storetest.Store { return open(t, path) })
}
