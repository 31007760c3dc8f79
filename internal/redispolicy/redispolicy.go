// Package redispolicy checks that a Redis keeps keys until they expire,
// for the stores whose keys are state, not cache: idempotency keys
// (idempotency/redisstore) and lock grants and tokens (lock/redisstore).
// A key Redis evicts under memory pressure is, to those stores, a key
// that never existed: a request that runs twice, a lock that frees
// itself, a token counter that restarts.
package redispolicy

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Need says what a store refuses an evicting Redis with.
type Need struct {
	// Err is the sentinel the error wraps.
	Err error
	// What names the store's keys, as in "idempotency keys need noeviction".
	What string
	// Harm says what an evicted key does, as in "its retry would then run
	// again".
	Harm string
}

// CheckNoEviction returns an error wrapping n.Err unless every server
// behind rdb (each shard of a cluster or ring) has maxmemory-policy
// noeviction. Any other policy can drop a key before its TTL: the
// volatile-* policies evict keys with a TTL, allkeys-* any. It reads
// INFO rather than CONFIG GET, which managed services often disable.
func CheckNoEviction(ctx context.Context, rdb redis.UniversalClient, n Need) error {
	check := func(ctx context.Context, c redis.Cmdable, addr string) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return fmt.Errorf("redisstore: read the eviction policy of %s: %w", addr, err)
		}
		policy := InfoField(info, "maxmemory_policy")
		switch policy {
		case "noeviction":
			return nil
		case "":
			return fmt.Errorf("%w: %s does not report its maxmemory_policy in INFO memory; %s need noeviction", n.Err, addr, n.What)
		}
		return fmt.Errorf("%w: %s has maxmemory-policy %s, which can drop a key before it expires, and %s; "+
			"set maxmemory-policy noeviction (in redis.conf, or CONFIG SET maxmemory-policy noeviction), on a Redis of its own if others need eviction",
			n.Err, addr, policy, n.Harm)
	}
	// A cluster's (or ring's) shards each evict by their own policy.
	if sh, ok := rdb.(interface {
		ForEachShard(ctx context.Context, fn func(ctx context.Context, c *redis.Client) error) error
	}); ok {
		return sh.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
			return check(ctx, c, c.Options().Addr)
		})
	}
	addr := "Redis"
	if c, ok := rdb.(*redis.Client); ok {
		addr = c.Options().Addr
	}
	return check(ctx, rdb, addr)
}

// InfoField returns the value of name in INFO's text, "" if absent.
func InfoField(info, name string) string {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), name+":"); ok {
			return v
		}
	}
	return ""
}
