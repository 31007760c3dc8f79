package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/idempotency/redisstore"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/storetest"
)

// The conformance suite of every idempotency.Store, on a real
// redis-server: the SET NX PX claim has one winner among concurrent
// inserts, and only the owner completes, renews, takes over or deletes.
func TestStore_Conformance(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: dbtest.StartRedis(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	st, err := redisstore.New(context.Background(), rdb, redisstore.Options{Now: func() time.Time { return storetest.IdempotencyNow }})
	if err != nil {
		t.Fatal(err)
	}
	storetest.RunIdempotency(t, st)
}

// A Redis restarted without persistence comes back empty: a key's retry
// is then a first request, which runs again, and its repeats replay the
// new answer. What docs/idempotency.md says of it.
func TestStore_KeysLostWithRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: dbtest.StartRedis(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	st, err := redisstore.New(ctx, rdb, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := idempotency.New(st, idempotency.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	runs := 0
	do := func() (string, bool) {
		t.Helper()
		a, replayed, err := k.Do(ctx, idempotency.Request{Scope: "s", Key: "order-1", Fingerprint: "fp"},
			func(context.Context) (idempotency.Answer, error) {
				runs++
				return idempotency.Answer{Status: 200, Body: fmt.Appendf(nil, "run %d", runs)}, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return string(a.Body), replayed
	}
	do()
	if a, replayed := do(); a != "run 1" || !replayed {
		t.Fatalf("before: %q replayed %v; want run 1 replayed", a, replayed)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil { // what a restart without AOF or RDB leaves
		t.Fatal(err)
	}
	if a, replayed := do(); a != "run 2" || replayed {
		t.Fatalf("after the loss: %q replayed %v; want run 2, not a replay", a, replayed)
	}
	if a, replayed := do(); a != "run 2" || !replayed {
		t.Fatalf("again: %q replayed %v; want run 2 replayed", a, replayed)
	}
}

// New refuses a Redis whose eviction policy can drop a key before its
// TTL, and names the policy to set.
func TestNew_EvictionPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: dbtest.StartRedis(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, tc := range []struct {
		policy string
		ok     bool
	}{
		{"noeviction", true},
		{"allkeys-lru", false},
		{"allkeys-lfu", false},
		{"allkeys-random", false},
		{"volatile-lru", false},
		{"volatile-lfu", false},
		{"volatile-random", false},
		{"volatile-ttl", false},
	} {
		if err := rdb.ConfigSet(ctx, "maxmemory-policy", tc.policy).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := redisstore.New(ctx, rdb, redisstore.Options{})
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v; want the store", tc.policy, err)
		case !tc.ok && (!errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), tc.policy) ||
			!strings.Contains(err.Error(), "maxmemory-policy noeviction")):
			t.Errorf("%s: %v; want ErrEvictionPolicy naming %s and noeviction", tc.policy, err, tc.policy)
		}
	}
}

// On a Redis Cluster of 3 masters: the conformance suite, keys spread
// over every master through the Keeper, each run once and replayed, and
// a shard with an evicting policy refused.
func TestStore_Cluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addrs := dbtest.StartRedisCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })

	t.Run("Conformance", func(t *testing.T) {
		st, err := redisstore.New(ctx, rdb, redisstore.Options{Prefix: "conf:", Now: func() time.Time { return storetest.IdempotencyNow }})
		if err != nil {
			t.Fatal(err)
		}
		storetest.RunIdempotency(t, st)
	})

	t.Run("Keeper", func(t *testing.T) {
		st, err := redisstore.New(ctx, rdb, redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		k, err := idempotency.New(st, idempotency.Config{MaxKeys: 1000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close() })
		runs := 0
		fn := func(context.Context) (idempotency.Answer, error) {
			runs++
			return idempotency.Answer{Status: 200, Body: fmt.Appendf(nil, "run %d", runs)}, nil
		}
		const keys = 60
		for round := range 2 {
			for i := range keys {
				r := idempotency.Request{Scope: "s", Key: fmt.Sprint("key-", i), Fingerprint: "fp"}
				a, replayed, err := k.Do(ctx, r, fn)
				if err != nil || replayed != (round == 1) || string(a.Body) != fmt.Sprint("run ", i+1) {
					t.Fatalf("round %d, key %d: %q replayed %v %v", round, i, a.Body, replayed, err)
				}
			}
		}
		if runs != keys {
			t.Fatalf("%d runs for %d keys sent twice; want one a key", runs, keys)
		}
		// The rows are spread over the masters, one slot a key.
		var masters atomic.Int32 // ForEachMaster calls at once
		err = rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			n, err := c.DBSize(ctx).Result()
			if n > 0 {
				masters.Add(1)
			}
			return err
		})
		if err != nil || masters.Load() != 3 {
			t.Fatalf("keys on %d masters (%v); want all 3", masters.Load(), err)
		}
		if _, err := k.Sweep(ctx); err != nil {
			t.Fatalf("sweep on the cluster: %v", err)
		}
	})

	t.Run("EvictionPolicy", func(t *testing.T) {
		one := redis.NewClient(&redis.Options{Addr: addrs[1]})
		t.Cleanup(func() { _ = one.Close() })
		if err := one.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
			t.Fatal(err)
		}
		_, err := redisstore.New(ctx, rdb, redisstore.Options{})
		if !errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), addrs[1]) {
			t.Fatalf("a shard on allkeys-lru: %v; want ErrEvictionPolicy naming %s", err, addrs[1])
		}
	})
}
