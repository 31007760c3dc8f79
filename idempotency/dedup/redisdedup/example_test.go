package redisdedup_test

import (
	"context"
	"errors"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/idempotency/dedup"
	"github.com/idgen/idgen/idempotency/dedup/redisdedup"
)

// A Redis Streams consumer that acknowledges a message once its handler
// ran, or once dedup says it ran before, and leaves it pending for the
// group to deliver again otherwise. (Not run: it needs a Redis.)
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	d, err := redisdedup.New(ctx, rdb, redisdedup.Options{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "shipping", Consumer: "c1",
		Streams: []string{"orders", ">"}, Count: 10}).Result()
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range res[0].Messages {
		err := d.Do(ctx, "shipping", m.ID, func(ctx context.Context) error {
			return ship(ctx, m.Values["order"]) // idempotent: an upsert by message ID
		})
		switch {
		case err == nil, errors.Is(err, dedup.ErrProcessed):
			rdb.XAck(ctx, "orders", "shipping", m.ID)
		case errors.Is(err, dedup.ErrInFlight):
			// Another consumer has it; if it dies, XAUTOCLAIM hands it on.
		default:
			log.Printf("message %s: %v", m.ID, err)
		}
	}
}

func ship(context.Context, any) error { return nil }
