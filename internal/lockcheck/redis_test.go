package lockcheck

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store/dbtest"
)

// TestRedis checks lock/redisstore on a Redis master with an
// asynchronous replica. The fault is a failover to a replica that
// missed the last grants: the replica is promoted while the workers go
// on on the old master, which then dies (SIGKILL), and the workers find
// the new master. Redis promises nothing through it (see the
// redisstore package doc): its effect on the lock is measured, and only
// the guard's properties are asserted.
func TestRedis(t *testing.T) {
	skipShort(t)
	t.Parallel()
	master := dbtest.StartRedisServer(t, "--repl-diskless-sync-delay", "0")
	host, port, _ := strings.Cut(master.Addr, ":")
	replica := dbtest.StartRedisServer(t, "--replicaof", host, port)
	ctx := context.Background()
	mc := redis.NewClient(&redis.Options{Addr: master.Addr})
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { mc.Close(); rc.Close() })
	if err := testtime.WaitFor(20*time.Second, 20*time.Millisecond, func() error {
		info, err := mc.Info(ctx, "replication").Result()
		if err == nil && !strings.Contains(info, "state=online") {
			err = fmt.Errorf("replica not online: %s", info)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	run(t, backend{name: "redis", dsn: "redis://" + master.Addr + "," + replica.Addr, measured: true,
		failover: func(t *testing.T, f *fleet) (string, error) {
			if err := rc.SlaveOf(ctx, "NO", "ONE").Err(); err != nil {
				return "", fmt.Errorf("promote the replica: %w", err)
			}
			from := f.grantCount()
			if err := f.waitGrants(from, 5, 30*time.Second); err != nil {
				return "", fmt.Errorf("grants on the old master alone: %w", err)
			}
			master.Kill()
			return fmt.Sprintf("failover: replica promoted (SLAVEOF NO ONE), %d grants on the old master alone, kill -9 of the old master", f.grantCount()-from), nil
		}})
}
