package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idgen/idgen/snowflake"
)

// RunWorkerRange checks that leases confined to a worker range
// (--worker-range) take only worker IDs in it, lowest first, create no
// rows outside it, and report ErrNoFreeWorker when it is used up. leases
// must be on a worker_node table with no row from 512 up.
func RunWorkerRange(t *testing.T, leases snowflake.LeaseTable) {
	ctx := context.Background()
	wr := snowflake.WorkerRange{From: 512, To: 515}
	cfg := func(i int) snowflake.LeasedConfig {
		return snowflake.LeasedConfig{WorkerRange: wr, RenewInterval: -1, Owner: fmt.Sprintf("range-%d", i), TTL: time.Minute}
	}
	for i := range 3 {
		l, err := snowflake.NewLeased(ctx, leases, cfg(i))
		if err != nil {
			t.Fatalf("lease %d in %s: %v", i, wr, err)
		}
		defer l.Shutdown(ctx)
		if got := l.WorkerID(); got != wr.From+int64(i) {
			t.Errorf("lease %d: worker %d, want %d", i, got, wr.From+int64(i))
		}
	}
	if _, err := snowflake.NewLeased(ctx, leases, cfg(3)); !errors.Is(err, snowflake.ErrNoFreeWorker) {
		t.Fatalf("fourth lease in %s: %v, want ErrNoFreeWorker", wr, err)
	}
	ws, err := leases.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.WorkerID >= 512 && (w.WorkerID < wr.From || w.WorkerID >= wr.To) {
			t.Errorf("row for worker %d outside %s", w.WorkerID, wr)
		}
	}
}
