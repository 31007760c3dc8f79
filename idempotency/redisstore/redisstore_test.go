package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/idempotency/redisstore"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/storetest"
)

// The conformance suite of every idempotency.Store, on a real
// redis-server: the SET NX PX claim has one winner among concurrent
// inserts, and only the owner completes, takes over or deletes.
func TestStore_Conformance(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: dbtest.StartRedis(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	st, err := redisstore.New(context.Background(), rdb, redisstore.Options{Now: func() time.Time { return storetest.IdempotencyNow }})
	if err != nil {
		t.Fatal(err)
	}
	storetest.RunIdempotency(t, st)
}
