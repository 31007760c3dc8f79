package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store"
)

// snowflakeMode is the snowflake generator of a serve process, with its
// worker ID leased from the store: any free one, or the static one given
// by --worker-id, which is held in the same table, so that the two kinds
// can never collide, and gets the same heartbeat and floor.
type snowflakeMode struct {
	gen    idgen.Generator
	layout snowflake.Layout
	leased *snowflake.Leased
	mode   string
}

func startSnowflake(ctx context.Context, st *store.Store, c serveConfig, log *slog.Logger) (*snowflakeMode, error) {
	cfg := snowflake.LeasedConfig{Generator: c.compat.layout.Config(), WorkerRange: c.compat.workers, TTL: c.leaseTTL, Owner: c.owner, Logger: log}
	source := "lease"
	if c.workerID >= 0 {
		gen, err := c.compat.staticConfig(c.workerID)
		if err != nil {
			return nil, err
		}
		cfg.Static, cfg.Generator, source = true, gen, "static"
	}
	l, err := snowflake.NewLeased(ctx, st.Leases(), cfg)
	if errors.Is(err, snowflake.ErrLayoutMismatch) {
		return nil, layoutRefusal(ctx, st, c, err)
	}
	if err != nil {
		if c.workerID >= 0 {
			return nil, fmt.Errorf("--worker-id %d: %w", c.workerID, err)
		}
		return nil, fmt.Errorf("snowflake worker lease: %w", err)
	}
	log.Info("snowflake worker", "worker_id", l.WorkerID(), "source", source, "owner", l.Owner(), "expires", l.LeaseExpiry())
	return &snowflakeMode{gen: l, layout: l.Layout(), leased: l, mode: c.mode}, nil
}

// wire plugs the generator into the server config: its routes, its
// decoder, its status for /admin/segments and /metrics, and, in
// snowflake mode, its readiness.
func (s *snowflakeMode) wire(cfg *server.Config, m *server.Metrics) {
	cfg.Snowflake = s.gen
	cfg.Layout = s.layout
	cfg.Worker = s.status
	m.WatchWorker(s.status)
	if s.mode == server.ModeSnowflake {
		storeReady := cfg.Ready
		cfg.Ready = func(ctx context.Context) error {
			if err := storeReady(ctx); err != nil {
				return err
			}
			return s.status().Err
		}
	}
}

func (s *snowflakeMode) status() server.WorkerStatus {
	return server.WorkerStatus{WorkerID: s.leased.WorkerID(), LeaseExpiresAt: s.leased.LeaseExpiry(),
		LastTimestamp: s.leased.LastTimestamp(), Err: s.leased.Ready()}
}

// close releases the lease so that the worker ID is free at once.
func (s *snowflakeMode) close(ctx context.Context) error {
	return s.leased.Shutdown(ctx)
}
