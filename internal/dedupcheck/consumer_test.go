package dedupcheck

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/idempotency/dedup"
	"github.com/idgen/idgen/store"
	_ "github.com/idgen/idgen/store/mysql"
	_ "github.com/idgen/idgen/store/postgres"
	_ "github.com/idgen/idgen/store/sqlite"
)

// The environment of a consumer process, which the test sets.
const (
	envConsumer = "IDGEN_DEDUPCHECK_CONSUMER" // its name; set only in a consumer
	envRedis    = "IDGEN_DEDUPCHECK_REDIS"    // the broker's address
	envStore    = "IDGEN_DEDUPCHECK_STORE"    // the store's DSN
	envNoDedup  = "IDGEN_DEDUPCHECK_NODEDUP"  // 1: no dedup, to show the checker finds twice
)

// The broker's shape.
const (
	stream = "orders"
	group  = "shipping"
	// batch is how many messages a consumer reads at once and acks
	// together after processing them all: a kill then often falls
	// between a message's commit and its ack, the window dedup is for.
	batch = 10
	// minIdle is how long a message stays pending with a consumer
	// before another claims it: a dead consumer's messages wait this
	// long, and a live but slow one may lose a message to another,
	// which is a duplicate delivery too.
	minIdle = 500 * time.Millisecond
)

// TestMain runs the consumer program when the test starts the binary as
// one, and the tests otherwise.
func TestMain(m *testing.M) {
	if name := os.Getenv(envConsumer); name != "" {
		if err := consume(context.Background(), name); err != nil {
			fmt.Fprintln(os.Stderr, "consumer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// say prints one line for the test: "start", "skip ID" (a redelivery
// dedup caught), "claimed N", "acked N", "error TEXT". Unbuffered, so that a kill
// loses no line already said.
func say(format string, args ...any) {
	_, _ = fmt.Fprintf(os.Stdout, format+"\n", args...)
}

// consume reads the stream as consumer name until it is killed: the
// pending messages of dead consumers first (XAUTOCLAIM), else new ones
// (XREADGROUP), each processed in a transaction of its own, and the
// batch acknowledged once processed.
func consume(ctx context.Context, name string) error {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis)})
	defer rdb.Close()
	dsn := os.Getenv(envStore)
	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	d, err := dedup.New(st.Dedup(), dedup.Config{})
	if err != nil {
		return err
	}
	c := consumer{name: name, db: st.DB(), d: d, noDedup: os.Getenv(envNoDedup) == "1",
		insert: `INSERT INTO effect (msg_id, consumer) VALUES (?, ?)`}
	if strings.HasPrefix(dsn, "postgres") {
		c.insert = `INSERT INTO effect (msg_id, consumer) VALUES ($1, $2)`
	}
	say("start")
	cursor := "0-0"
	for {
		msgs, next, err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: stream, Group: group, Consumer: name,
			MinIdle: minIdle, Start: cursor, Count: batch}).Result()
		if err != nil {
			return fmt.Errorf("xautoclaim: %w", err)
		}
		cursor = next
		if len(msgs) > 0 {
			say("claimed %d", len(msgs))
		} else {
			res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: name,
				Streams: []string{stream, ">"}, Count: batch, Block: 50 * time.Millisecond}).Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				return fmt.Errorf("xreadgroup: %w", err)
			}
			msgs = res[0].Messages
		}
		var acks []string
		for _, m := range msgs {
			if c.process(ctx, m.ID) {
				acks = append(acks, m.ID)
			}
		}
		if len(acks) > 0 {
			if err := rdb.XAck(ctx, stream, group, acks...).Err(); err != nil {
				return fmt.Errorf("xack: %w", err)
			}
			say("acked %d", len(acks))
		}
	}
}

// consumer is what process needs.
type consumer struct {
	name    string
	db      *sql.DB
	d       *dedup.Deduper
	noDedup bool
	insert  string
}

// process does a message's business write, an effect row, with the
// dedup record in one transaction, and reports whether to ack it. An
// error leaves it pending, to be claimed again.
func (c *consumer) process(ctx context.Context, id string) bool {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		say("error begin: %v", err)
		return false
	}
	effect := func(ctx context.Context) error {
		_, err := tx.ExecContext(ctx, c.insert, id, c.name)
		return err
	}
	if c.noDedup {
		err = effect(ctx)
	} else {
		err = c.d.Do(ctx, tx, group, id, effect)
	}
	switch {
	case errors.Is(err, dedup.ErrProcessed):
		_ = tx.Rollback()
		say("skip %s", id)
		return true
	case err != nil:
		_ = tx.Rollback()
		say("error %v", err)
		return false
	}
	if err := tx.Commit(); err != nil {
		say("error commit: %v", err)
		return false
	}
	return true
}
