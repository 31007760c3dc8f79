package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/store"
)

// maxSweepBatch bounds --idempotency-sweep-batch: a sweep statement
// locks the rows it deletes until it commits, and keyed requests for them
// wait meanwhile.
const maxSweepBatch = 1_000_000

func idempotencyFlags(f *pflag.FlagSet) {
	f.Bool("idempotency", true, "answer Idempotency-Key requests from keys kept in the store (off: they get 400 idempotency_disabled)")
	f.Duration("idempotency-ttl", idempotency.DefaultTTL, "how long a key is kept when the request sends no Idempotency-TTL")
	f.Duration("idempotency-max-ttl", idempotency.DefaultMaxTTL, "longest Idempotency-TTL a request may ask for (at most 168h, 7 days)")
	f.Duration("idempotency-lock-timeout", idempotency.DefaultLockTimeout, "how long a first request holds its key; after it a retry may take over the key of an instance that died")
	int64Flag(f, "idempotency-max-keys", idempotency.DefaultMaxKeys, "most live keys per caller (API token); past it, new keys get 429 idempotency_key_limit_reached (0: no limit)")
	f.Duration("idempotency-sweep-interval", idempotency.DefaultSweepEvery, "how often expired keys are deleted and live keys counted for the cap")
	intFlag(f, "idempotency-sweep-batch", idempotency.DefaultSweepBatch, "most expired keys one delete statement removes")
}

// idempotencyConfig reads the flags; ok is false with --idempotency=false.
func idempotencyConfig(cmd *cobra.Command) (cfg idempotency.Config, ok bool, err error) {
	f := cmd.Flags()
	ok, _ = f.GetBool("idempotency")
	cfg.TTL, _ = f.GetDuration("idempotency-ttl")
	cfg.MaxTTL, _ = f.GetDuration("idempotency-max-ttl")
	cfg.LockTimeout, _ = f.GetDuration("idempotency-lock-timeout")
	cfg.MaxKeys, _ = f.GetInt64("idempotency-max-keys")
	cfg.SweepEvery, _ = f.GetDuration("idempotency-sweep-interval")
	cfg.SweepBatch, _ = f.GetInt("idempotency-sweep-batch")
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--idempotency-ttl", cfg.TTL}, {"--idempotency-max-ttl", cfg.MaxTTL}, {"--idempotency-lock-timeout", cfg.LockTimeout},
		{"--idempotency-sweep-interval", cfg.SweepEvery}} {
		if d.v < time.Second {
			bad("%s must be at least 1s, got %v", d.flag, d.v)
		}
	}
	if cfg.MaxTTL > idempotency.CeilingTTL {
		bad("--idempotency-max-ttl must be at most %v (7 days: keys are for retries, and longer ones only fill the store), got %v", idempotency.CeilingTTL, cfg.MaxTTL)
	}
	if cfg.TTL > cfg.MaxTTL {
		bad("--idempotency-ttl (%v) must not exceed --idempotency-max-ttl (%v)", cfg.TTL, cfg.MaxTTL)
	}
	if cfg.MaxKeys < 0 {
		bad("--idempotency-max-keys must be 0 (no limit) or more, got %d", cfg.MaxKeys)
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = -1 // Config's "no cap"
	}
	if cfg.SweepBatch < 1 || cfg.SweepBatch > maxSweepBatch {
		bad("--idempotency-sweep-batch must be from 1 to %d (one delete statement holds its rows' locks until it commits), got %d", maxSweepBatch, cfg.SweepBatch)
	}
	return cfg, ok, errors.Join(errs...)
}

// startKeeper returns the key keeper over st's table, sweeping, or nil
// when keys are off. Close it before the store.
func startKeeper(st *store.Store, cfg idempotency.Config, on bool, m *server.Metrics, log *slog.Logger) (*idempotency.Keeper, error) {
	if !on {
		return nil, nil
	}
	cfg.Observer, cfg.Logger = m, log
	k, err := idempotency.New(st.Idempotency(), cfg)
	if err != nil {
		return nil, err
	}
	k.Start()
	return k, nil
}
