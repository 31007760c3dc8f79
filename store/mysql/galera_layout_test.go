package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/clustertest"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/mysql"
)

// On Galera, row locks are local to a node: two claims on different nodes
// in clashing layouts both pass their checks unless their writes overlap,
// so that certification aborts one. Here one layout already holds worker
// IDs 0-511 (record 0); each round, a claim that grows it to 512-1023 on
// node 1 and a claim of 41/11/11 on 1024-2047 (a new record) on node 2
// start together. Exactly one may succeed, every round.
func TestLeases_LayoutRaceAcrossGaleraNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Galera cluster")
	}
	g := clustertest.StartGalera(t, 2)
	ctx := context.Background()
	open := func(n *clustertest.GaleraNode) *mysql.Store {
		s, err := mysql.Open(ctx, g.DSN("wsrep_sync_wait=1", n))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if _, err := s.Migrate(ctx, nil); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1, s2 := open(g.Nodes[0]), open(g.Nodes[1])
	std := snowflake.Layout{}
	wide, err := snowflake.ParseLayout("41/11/11", "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	const rounds = 30
	for round := range rounds {
		for _, q := range []string{"DELETE FROM snowflake_layout", "DELETE FROM worker_node"} {
			// The previous round's writes from node 2 may still be
			// applying on node 1: certification then aborts the DELETE
			// (1213), exactly as it aborts the store's own transactions,
			// which retry the same way, until the apply is done.
			var err error
			testtime.Until(10*time.Second, 50*time.Millisecond, func() bool {
				_, err = s1.DB().ExecContext(ctx, q)
				return err == nil || !mysql.IsRetryableForTest(err)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s1.Leases().ClaimLayout(ctx, fmt.Sprintf("base-%d", round), now, time.Minute, std, snowflake.WorkerRange{From: 0, To: 512}, -1); err != nil {
			t.Fatalf("round %d: first claim: %v", round, err)
		}
		var errs [2]error
		var wg sync.WaitGroup
		gate := make(chan struct{})
		wg.Go(func() {
			<-gate
			_, errs[0] = s1.Leases().ClaimLayout(ctx, fmt.Sprintf("grow-%d", round), now, time.Minute, std, snowflake.WorkerRange{From: 512, To: 1024}, -1)
		})
		wg.Go(func() {
			<-gate
			_, errs[1] = s2.Leases().ClaimLayout(ctx, fmt.Sprintf("wide-%d", round), now, time.Minute, wide, snowflake.WorkerRange{From: 1024, To: 2048}, -1)
		})
		close(gate)
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, snowflake.ErrLayoutMismatch):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d of the two clashing claims succeeded on two nodes: %v", round, ok, errs)
		}
	}
	t.Logf("%d rounds of clashing claims on two Galera nodes: one succeeded each time", rounds)
}
