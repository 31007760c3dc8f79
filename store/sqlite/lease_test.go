package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/snowflake/snowflaketest"
	"github.com/idgen/idgen/store/sqlite"
	"github.com/idgen/idgen/store/storetest"
)

// Each open is another pool on one file, as another `idgen serve` on the
// same host would have.
func TestLeases_Conformance(t *testing.T) {
	t.Parallel()
	path := "sqlite://" + filepath.Join(t.TempDir(), "leases.db")
	snowflaketest.RunLeaseStore(t, func(t *testing.T) snowflaketest.LeaseStore { return open(t, path).Leases() })
}

func TestLeases_WorkerRange(t *testing.T) {
	t.Parallel()
	storetest.RunWorkerRange(t, open(t, "sqlite://"+filepath.Join(t.TempDir(), "range.db")).Leases())
}

// Each table is a file of its own; each open another pool on it.
func TestLeases_LayoutConformance(t *testing.T) {
	t.Parallel()
	snowflaketest.RunLayoutStore(t, func(t *testing.T) func(t *testing.T) snowflake.LeaseTable {
		path := "sqlite://" + filepath.Join(t.TempDir(), "layout.db")
		return func(t *testing.T) snowflake.LeaseTable { return open(t, path).Leases() }
	})
}

// The layout table is created beside Leaf's leaf_alloc too, where idgen
// creates no sequence table of its own.
func TestLeases_LayoutBesideLeafAlloc(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.OpenTable(ctx, "sqlite://"+filepath.Join(t.TempDir(), "leaf.db"), "leaf_alloc")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	l, err := snowflake.NewLeased(ctx, st.Leases(), snowflake.LeasedConfig{RenewInterval: -1})
	if err != nil {
		t.Fatalf("NewLeased beside leaf_alloc: %v", err)
	}
	defer l.Shutdown(ctx)
	recs, err := st.Leases().Layouts(ctx)
	if err != nil || len(recs) != 1 || recs[0].Layout != l.Layout() {
		t.Fatalf("Layouts = %v, %v; want the one of %s", recs, err, l.Layout())
	}
}
