package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"
)

// stream is the Redis stream orders are published to.
const stream = "orders"

// pipeline is the outbox relay and the order consumer, over one Redis.
type pipeline struct {
	s   *service
	rdb *redis.Client
	log *slog.Logger
}

func newPipeline(ctx context.Context, s *service, addr string, log *slog.Logger) (*pipeline, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("orders: Redis at %s: %w", addr, err)
	}
	return &pipeline{s: s, rdb: rdb, log: log}, nil
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

// redact hides a DSN's password.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(a DSN that does not parse)"
	}
	return u.Redacted()
}
