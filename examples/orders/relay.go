package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/idempotency/dedup"
)

// stream is the Redis stream orders are published to.
const stream = "orders"

// pipeline is the outbox relay and the order consumer, over one Redis.
type pipeline struct {
	s   *service
	rdb *redis.Client
	log *slog.Logger
	// claimIdle is how long a message stays with a consumer that does
	// not acknowledge it before another claims it.
	claimIdle time.Duration
}

func newPipeline(ctx context.Context, s *service, addr string, log *slog.Logger) (*pipeline, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("orders: Redis at %s: %w", addr, err)
	}
	return &pipeline{s: s, rdb: rdb, log: log, claimIdle: 5 * time.Second}, nil
}

func (p *pipeline) Close() { _ = p.rdb.Close() }

// Relay publishes outbox rows in ID order, then marks them sent: at
// least once, since a crash between the two publishes a row again,
// which the consumer's dedup absorbs.
func (p *pipeline) Relay(ctx context.Context) error {
	for {
		n, err := p.relayOnce(ctx)
		if err != nil && ctx.Err() == nil {
			p.log.Warn("orders: relay", "err", err)
		}
		if n == 0 || err != nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// relayOnce publishes up to 100 unsent rows and returns how many.
func (p *pipeline) relayOnce(ctx context.Context) (int, error) {
	batch, err := p.unsent(ctx)
	if err != nil {
		return 0, err
	}
	for i, r := range batch {
		if err := p.rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"order", r.id, "payload", r.payload}}).Err(); err != nil {
			return i, err
		}
		if _, err := p.s.db.ExecContext(ctx, p.s.q.outboxSent, r.id); err != nil { //nolint:gosec // G701: a constant of orders.go, rendered once
			return i, err
		}
	}
	return len(batch), nil
}

type outboxRow struct {
	id      int64
	payload string
}

// unsent reads up to 100 unsent outbox rows in ID order.
func (p *pipeline) unsent(ctx context.Context) ([]outboxRow, error) {
	rows, err := p.s.db.QueryContext(ctx, p.s.q.outboxUnsent) //nolint:gosec // G701: a constant of orders.go, rendered once
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var batch []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.id, &r.payload); err != nil {
			return nil, err
		}
		batch = append(batch, r)
	}
	return batch, rows.Err()
}

// group is the consumer group that ships orders.
const group = "shipping"

// Consume ships each published order once, as consumer name of the
// group: the shipment and the dedup record commit in one transaction,
// then the message is acknowledged. A consumer killed between the commit
// and the acknowledgement leaves the message pending; another claims it
// (XAUTOCLAIM) and dedup skips it. A relay's second publication of one
// order is another message with the same order key, skipped the same
// way.
func (p *pipeline) Consume(ctx context.Context, name string) error {
	if err := p.rdb.XGroupCreateMkStream(ctx, stream, group, "0").Err(); err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("orders: create the consumer group: %w", err)
	}
	for ctx.Err() == nil {
		msgs, err := p.next(ctx, name)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("orders: consume", "err", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		for _, m := range msgs {
			if err := p.ship(ctx, m); err != nil {
				p.log.Warn("orders: ship", "message", m.ID, "err", err)
				continue // left pending: redelivered by a claim
			}
			if err := p.rdb.XAck(ctx, stream, group, m.ID).Err(); err != nil {
				p.log.Warn("orders: ack", "message", m.ID, "err", err)
			}
		}
	}
	return ctx.Err()
}

// next claims messages left pending by a consumer for p.claimIdle, or
// else reads new ones.
func (p *pipeline) next(ctx context.Context, name string) ([]redis.XMessage, error) {
	claimed, _, err := p.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: stream, Group: group, Consumer: name, MinIdle: p.claimIdle, Start: "0", Count: 100}).Result()
	if err != nil || len(claimed) > 0 {
		return claimed, err
	}
	res, err := p.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: name, Streams: []string{stream, ">"}, Count: 100, Block: time.Second}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[0].Messages, nil
}

// ship records the order's shipment once per order, whatever the
// message: the dedup key is the order's ID.
func (p *pipeline) ship(ctx context.Context, m redis.XMessage) error {
	id, _ := m.Values["order"].(string)
	if _, err := strconv.ParseInt(id, 10, 64); err != nil {
		p.log.Warn("orders: a message with no order ID, dropped", "message", m.ID)
		return nil
	}
	err := p.s.inTx(ctx, func(tx *sql.Tx) error {
		return p.s.dedup.Do(ctx, tx, group, id, func(ctx context.Context) error {
			_, err := tx.ExecContext(ctx, p.s.q.shipmentAdd, id) //nolint:gosec // G701: a constant of orders.go, rendered once
			return err
		})
	})
	if errors.Is(err, dedup.ErrProcessed) {
		return nil
	}
	return err
}

// redact hides a DSN's password.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(a DSN that does not parse)"
	}
	return u.Redacted()
}
