package redisstore

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// checkEviction returns an error wrapping ErrEvictionPolicy unless every
// server behind rdb has maxmemory-policy noeviction. It reads INFO
// rather than CONFIG GET, which managed services often disable.
func checkEviction(ctx context.Context, rdb redis.UniversalClient) error {
	check := func(ctx context.Context, c redis.Cmdable, addr string) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return fmt.Errorf("redisstore: read the eviction policy of %s: %w", addr, err)
		}
		policy := infoField(info, "maxmemory_policy")
		switch policy {
		case "noeviction":
			return nil
		case "":
			return fmt.Errorf("%w: %s does not report its maxmemory_policy in INFO memory; idempotency keys need noeviction", ErrEvictionPolicy, addr)
		}
		return fmt.Errorf("%w: %s has maxmemory-policy %s, which can drop a key before it expires, and its retry would then run again; "+
			"set maxmemory-policy noeviction (in redis.conf, or CONFIG SET maxmemory-policy noeviction), on a Redis of its own if others need eviction",
			ErrEvictionPolicy, addr, policy)
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

// infoField returns the value of name in INFO's text, "" if absent.
func infoField(info, name string) string {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), name+":"); ok {
			return v
		}
	}
	return ""
}
