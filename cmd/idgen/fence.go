package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/fence"
)

// startFencing configures the store's fencing from the flags, records
// or checks them against the fleet's (store.RecordFence), counts its
// fences, and checks the store's identity once before anything is
// reserved or claimed, so that the log says at start what the store is,
// and a failover or restore that happened while the instance was down is
// fenced before it serves.
func startFencing(ctx context.Context, st *store.Store, c serveConfig, log *slog.Logger, m *server.Metrics) error {
	cfg := fence.Config{Margin: c.fenceMargin, RangeCap: max(c.maxStep, c.maxRange), LeaseTTL: c.leaseTTL}
	if err := st.ConfigureFence(cfg, log); err != nil {
		return fmt.Errorf("--fence-margin: %w", err)
	}
	st.ObserveFences(m.StoreFenced)
	// The fleet's values, recorded by its first instance, are every
	// fencer's; a second instance started with other ones is refused.
	if err := st.RecordFence(ctx); err != nil {
		return err
	}
	if err := st.CheckIdentity(ctx); err != nil {
		if errors.Is(err, fence.ErrUnsupported) {
			log.Warn("store identity unknown: failovers and restores will not be fenced", "err", err)
			return nil
		}
		return fmt.Errorf("check the store's identity (is the schema migrated? run idgen migrate): %w", err)
	}
	cur, rec, err := st.Identity(ctx)
	if err != nil {
		return err
	}
	margin := "auto"
	if c.fenceMargin > 0 {
		margin = fmt.Sprint(c.fenceMargin)
	}
	log.Info("store identity", "identity", cur.String(), "generation", rec.Generation, "tag_floor", rec.Floor, "fence_margin", margin)
	return nil
}
