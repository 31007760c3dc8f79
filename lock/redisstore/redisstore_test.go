package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/lock/locktest"
	"github.com/idgen/idgen/lock/redisstore"
	"github.com/idgen/idgen/store/dbtest"
)

// suiteTTL is the TTL the suite lets lapse: Redis expires by its own
// clock to the microsecond, so short is precise; not shorter, for a
// loaded 2-core CI machine.
const suiteTTL = 300 * time.Millisecond

// suite is locktest's Config over Stores opened by open, each on a
// client of its own; Kill closes that client and nothing else, as a
// crash would.
func suite(t *testing.T, open func() redis.UniversalClient, o redisstore.Options) locktest.Config {
	var clients sync.Map // *redisstore.Store → redis.UniversalClient
	return locktest.Config{
		TTL: suiteTTL,
		Open: func(t *testing.T) lock.Backend {
			rdb := open()
			t.Cleanup(func() { _ = rdb.Close() })
			st, err := redisstore.New(context.Background(), rdb, o)
			if err != nil {
				t.Fatal(err)
			}
			clients.Store(st, rdb)
			return st
		},
		Kill: func(t *testing.T, b lock.Backend) {
			rdb, _ := clients.Load(b)
			_ = rdb.(redis.UniversalClient).Close()
		},
	}
}

// The conformance suite on one redis-server. A dead waiter's place
// lapses WaiterTTL after its last renewal, so the live one behind three
// is granted within it.
func TestStore_Conformance(t *testing.T) {
	t.Parallel()
	addr := dbtest.StartRedis(t)
	locktest.Run(t, suite(t, func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: addr})
	}, redisstore.Options{WaiterTTL: 300 * time.Millisecond}))
}
