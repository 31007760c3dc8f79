package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/snowflake"
)

// snowflakeMode is the snowflake generator of a serve process: leased
// from the store, or with a static worker ID.
type snowflakeMode struct {
	gen    idgen.Generator
	layout snowflake.Layout
	leased *snowflake.Leased // nil with a static worker ID
	static *snowflake.Generator
	mode   string
}

func startSnowflake(ctx context.Context, st backend, c serveConfig, log *slog.Logger) (*snowflakeMode, error) {
	if c.workerID >= 0 {
		// A static worker ID has no persisted last timestamp: the operator
		// vouches that no other process uses it and that the clock is
		// sane across restarts.
		g, err := snowflake.New(snowflake.Config{WorkerID: c.workerID})
		if err != nil {
			return nil, fmt.Errorf("--worker-id: %w", err)
		}
		log.Info("snowflake worker", "worker_id", c.workerID, "source", "static")
		return &snowflakeMode{gen: snowflake.NewTagged(g), layout: g.Layout(), static: g, mode: c.mode}, nil
	}
	l, err := snowflake.NewLeased(ctx, st.Leases(), snowflake.LeasedConfig{TTL: c.leaseTTL, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("snowflake worker lease: %w", err)
	}
	log.Info("snowflake worker", "worker_id", l.WorkerID(), "source", "lease", "owner", l.Owner(), "expires", l.LeaseExpiry())
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
	if s.leased == nil {
		return server.WorkerStatus{WorkerID: s.static.WorkerID(), LastTimestamp: s.static.LastTimestamp()}
	}
	return server.WorkerStatus{WorkerID: s.leased.WorkerID(), LeaseExpiresAt: s.leased.LeaseExpiry(),
		LastTimestamp: s.leased.LastTimestamp(), Err: s.leased.Ready()}
}

// close releases the lease so that the worker ID is free at once.
func (s *snowflakeMode) close(ctx context.Context) error {
	if s.leased == nil {
		return nil
	}
	return s.leased.Close(ctx)
}
