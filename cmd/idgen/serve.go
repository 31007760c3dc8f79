package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/spf13/cobra"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

func newServe() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve IDs over HTTP",
		Args:  cobra.NoArgs,
		RunE:  runServe,
	}
	f := cmd.Flags()
	f.String("addr", ":8080", "listen address")
	f.String("mode", server.ModeSegment, "strategy behind /id/{tag}: segment or snowflake")
	f.Bool("auto-create-tags", true, "create a tag on its first use (turn off in production to refuse typos)")
	f.Int64("default-step", 1000, "step of auto-created tags")
	f.Int("max-batch", 10000, "largest ?count= accepted")
	f.Int64("max-range", 1_000_000, "largest ?size= of POST /segment/{tag}/range")
	f.Bool("migrate", true, "apply schema migrations at start")
	f.Bool("snowflake", true, "serve /snowflake/{tag} too (leases a worker ID); --mode snowflake needs it")
	f.Int64("worker-id", -1, "static snowflake worker ID (0-1023), held in the store like a lease and never leased to others; -1 leases any free one")
	f.Duration("lease-ttl", 30*time.Second, "snowflake worker lease time to live; renewed every third of it")
	f.Duration("shutdown-timeout", 10*time.Second, "how long to drain requests and hand back ranges on SIGTERM")
	f.String("log-format", "text", "log format: text or json")
	f.Bool("access-log", true, "log every request")
	f.String("admin-token", "", "bearer token for /admin/* (without it /admin/* answers 403)")
	f.String("api-tokens", "", "client tokens for the ID endpoints: a file path, or inline TOKEN=tag1,tag2;TOKEN2=*")
	compatFlags(f)
	return cmd
}

// serveConfig is the flags of serve, read once.
type serveConfig struct {
	addr, mode, logFormat, adminToken, apiTokens string
	autoCreate, migrate, snowflake, accessLog    bool
	defaultStep, maxRange, workerID              int64
	maxBatch                                     int
	leaseTTL, drain                              time.Duration
	compat                                       compatConfig
}

func readServeFlags(cmd *cobra.Command) serveConfig {
	f := cmd.Flags()
	var c serveConfig
	c.addr, _ = f.GetString("addr")
	c.mode, _ = f.GetString("mode")
	c.autoCreate, _ = f.GetBool("auto-create-tags")
	c.defaultStep, _ = f.GetInt64("default-step")
	c.maxBatch, _ = f.GetInt("max-batch")
	c.maxRange, _ = f.GetInt64("max-range")
	c.migrate, _ = f.GetBool("migrate")
	c.snowflake, _ = f.GetBool("snowflake")
	c.workerID, _ = f.GetInt64("worker-id")
	c.leaseTTL, _ = f.GetDuration("lease-ttl")
	c.drain, _ = f.GetDuration("shutdown-timeout")
	c.logFormat, _ = f.GetString("log-format")
	c.accessLog, _ = f.GetBool("access-log")
	c.adminToken, _ = f.GetString("admin-token")
	c.apiTokens, _ = f.GetString("api-tokens")
	return c
}

func runServe(cmd *cobra.Command, _ []string) error {
	c := readServeFlags(cmd)
	log, err := newLogger(c.logFormat)
	if err != nil {
		return err
	}
	if c.compat, err = readCompatFlags(cmd); err != nil {
		return err
	}
	apiTokens, err := loadAPITokens(c.apiTokens)
	if err != nil {
		return err
	}
	if c.mode == server.ModeSnowflake && !c.snowflake {
		return errors.New("--mode snowflake needs --snowflake=true")
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	st, err := openFlagStore(ctx, cmd)
	if err != nil {
		return err
	}
	defer st.Close()
	if c.migrate {
		v, err := st.Migrate(ctx, nil)
		if err != nil {
			return err
		}
		log.Info("schema ready", "version", v)
	}
	if name, _ := cmd.Flags().GetString("sequence-table"); name == "leaf_alloc" {
		warnRefusedTags(ctx, st, log)
	}

	metrics := server.NewMetrics()
	alloc, err := segment.New(st, &segment.Options{AutoCreate: c.autoCreate, DefaultStep: c.defaultStep, Logger: log, Observer: metrics})
	if err != nil {
		return err
	}
	cfg := server.Config{
		Segment:    alloc,
		Mode:       c.mode,
		MaxBatch:   c.maxBatch,
		Ready:      segmentReady(st, alloc),
		Logger:     log,
		AccessLog:  c.accessLog,
		Admin:      st,
		Stats:      alloc,
		Ranges:     alloc,
		MaxRange:   c.maxRange,
		AdminToken: c.adminToken,
		APITokens:  apiTokens,
		Metrics:    metrics,
		Layout:     c.compat.layout,
		Compat:     c.compat.apis,
	}
	var sf *snowflakeMode
	if c.snowflake {
		if sf, err = startSnowflake(ctx, st, c, log); err != nil {
			_ = alloc.Close()
			return err
		}
		sf.wire(&cfg, metrics)
	}

	gin.SetMode(gin.ReleaseMode)
	h, err := server.New(cfg)
	if err == nil {
		err = serveUntilDone(ctx, c, h, log)
	}
	// Drained: release the worker lease, then hand back unused ranges,
	// while the store is still open.
	sctx, cancel := context.WithTimeout(context.Background(), c.drain)
	defer cancel()
	if sf != nil {
		if e := sf.close(sctx); e != nil {
			log.Warn("worker lease release incomplete", "err", e)
		}
	}
	if e := alloc.Shutdown(sctx); e != nil {
		log.Warn("hand-back incomplete", "err", e)
	}
	if err == nil {
		log.Info("stopped")
	}
	return err
}

// segmentReady reports ready while IDs are buffered, without asking the
// store, and otherwise while the store answers: taking every instance out
// of the load balancer during a database outage would throw away exactly
// the ride-through that the buffers exist for, and a probe must not wait
// on a hung database.
func segmentReady(st backend, alloc *segment.Allocator) func(context.Context) error {
	return func(ctx context.Context) error {
		if alloc.Buffered() > 0 {
			return nil
		}
		return st.Ping(ctx)
	}
}

// serveUntilDone serves h until ctx ends, then drains in-flight requests.
func serveUntilDone(ctx context.Context, c serveConfig, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.addr, err)
	}
	srv := server.NewHTTPServer(c.addr, h)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String(), "mode", c.mode)

	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("shutting down", "timeout", c.drain)
	}
	sctx, cancel := context.WithTimeout(context.Background(), c.drain)
	defer cancel()
	if e := srv.Shutdown(sctx); e != nil {
		log.Warn("drain incomplete", "err", e)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func newLogger(format string) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, nil)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

// loadAPITokens reads --api-tokens: a file when the value names one,
// otherwise the inline form.
func loadAPITokens(v string) (server.APITokens, error) {
	if v == "" {
		return nil, nil
	}
	if b, err := os.ReadFile(v); err == nil {
		v = string(b)
	}
	return server.ParseAPITokens(v)
}
