package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/internal/sqlstore"
)

// OwnerRenewals checks what a serve process does on every heartbeat: it
// holds a worker lease and a presence lease under one owner, renews both
// on timers of the same period, and each renewal checks in the other's
// row too. Renewed at the same moments, many times over, every renewal
// succeeds at its first attempt: the two transactions take the rows in
// one order, so they wait for each other but never deadlock. (Taken in
// opposite orders they deadlocked, and on PostgreSQL the pair waited out
// the deadlock timeout, failed together, retried together and deadlocked
// again until the worker lease lapsed under a live process.)
func OwnerRenewals(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	s := open(t)
	var retries atomic.Int64
	s.ObserveRetries(func(op string) {
		if op == "renew" {
			retries.Add(1)
		}
	})
	owner := segmenttest.UniqueTag("owner")
	now := time.Now()
	ttl := time.Minute
	worker, err := s.Leases().ClaimRange(ctx, owner, now, ttl, 800, 810)
	if err != nil {
		t.Fatal(err)
	}
	presence, err := s.Leases().ClaimRange(ctx, owner, now, ttl, sqlstore.PresenceFrom, sqlstore.PresenceTo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Leases().Release(ctx, worker, now)
		_ = s.Leases().Release(ctx, presence, now)
	})

	const rounds = 200
	leases := []*snowflake.Lease{&worker, &presence}
	for round := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, len(leases))
		for i, l := range leases {
			wg.Go(func() {
				<-start
				renewed, err := s.Leases().Renew(ctx, *l, time.Now(), time.Now(), ttl)
				if err == nil {
					*l = renewed
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: renewal of worker %d: %v", round, leases[i].WorkerID, err)
			}
		}
	}
	if n := retries.Load(); n != 0 {
		t.Fatalf("%d of %d pairs of renewals of one owner's two leases were retried: they deadlocked", n, rounds)
	}
	t.Logf("%d pairs of simultaneous renewals of one owner's worker and presence leases, none retried", rounds)
}
