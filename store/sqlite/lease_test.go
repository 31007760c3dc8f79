package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/idgen/idgen/internal/storetest"
	"github.com/idgen/idgen/snowflake/snowflaketest"
)

// Each open is another pool on one file, as another `idgen serve` on the
// same host would have.
func TestLeases_Conformance(t *testing.T) {
	path := "sqlite://" + filepath.Join(t.TempDir(), "leases.db")
	snowflaketest.RunLeaseStore(t, func(t *testing.T) snowflaketest.LeaseStore { return open(t, path).Leases() })
}

func TestLeases_WorkerRange(t *testing.T) {
	storetest.RunWorkerRange(t, open(t, "sqlite://"+filepath.Join(t.TempDir(), "range.db")).Leases())
}
