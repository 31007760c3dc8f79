package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/spf13/cobra"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/snowflake"
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
	f.Int64("max-step", 1_000_000, "largest segment a load reserves when the step grows under load")
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
	f.Int("max-tags", 10000, "most tags one process serves; past it, new tags get 409 tag_limit_reached (0: no limit)")
	f.String("metrics-token", "", "bearer token /metrics requires (default: /metrics is open)")
	f.StringSlice("trusted-proxies", nil, "CIDRs of proxies whose X-Forwarded-For is believed for the logged client address (default: none)")
	compatFlags(f)
	idempotencyFlags(f)
	return cmd
}

// serveConfig is the flags of serve, read once.
type serveConfig struct {
	store, addr, mode, logFormat, adminToken, apiTokens, metricsToken string
	autoCreate, migrate, snowflake, accessLog                         bool
	defaultStep, maxStep, maxRange, workerID                          int64
	maxBatch, maxTags                                                 int
	leaseTTL, drain                                                   time.Duration
	trustedProxies                                                    []string

	tokens server.APITokens // parsed from apiTokens by validate
	compat compatConfig     // the layout and compatibility flags
}

func readServeFlags(cmd *cobra.Command) serveConfig {
	f := cmd.Flags()
	var c serveConfig
	c.addr, _ = f.GetString("addr")
	c.mode, _ = f.GetString("mode")
	c.autoCreate, _ = f.GetBool("auto-create-tags")
	c.defaultStep, _ = f.GetInt64("default-step")
	c.maxStep, _ = f.GetInt64("max-step")
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
	c.maxTags, _ = f.GetInt("max-tags")
	c.metricsToken, _ = f.GetString("metrics-token")
	c.trustedProxies, _ = f.GetStringSlice("trusted-proxies")
	c.store = storeDSN(cmd)
	return c
}

// validate checks every flag, in flag terms, before serve touches the
// database: a typo must not migrate a schema or lease a worker ID first.
func (c *serveConfig) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.mode != server.ModeSegment && c.mode != server.ModeSnowflake {
		bad("--mode must be segment or snowflake, got %q", c.mode)
	}
	if c.mode == server.ModeSnowflake && !c.snowflake {
		bad("--mode snowflake needs --snowflake=true")
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		bad("--log-format must be text or json, got %q", c.logFormat)
	}
	if c.defaultStep < 1 {
		bad("--default-step must be at least 1, got %d", c.defaultStep)
	}
	if c.maxStep < 1 {
		bad("--max-step must be at least 1, got %d", c.maxStep)
	}
	if c.maxBatch < 1 {
		bad("--max-batch must be at least 1, got %d", c.maxBatch)
	}
	if c.maxRange < 1 {
		bad("--max-range must be at least 1, got %d", c.maxRange)
	}
	if c.maxTags < 0 {
		bad("--max-tags must be 0 (no limit) or more, got %d", c.maxTags)
	}
	if max := (snowflake.Layout{}).MaxWorkerID(); c.workerID < -1 || c.workerID > max {
		bad("--worker-id must be -1 (lease one) or 0 to %d, got %d", max, c.workerID)
	}
	if c.leaseTTL < time.Second {
		bad("--lease-ttl must be at least 1s, got %v", c.leaseTTL)
	}
	if c.drain < 0 {
		bad("--shutdown-timeout must not be negative, got %v", c.drain)
	}
	for _, t := range []struct{ flag, value string }{{"--admin-token", c.adminToken}, {"--metrics-token", c.metricsToken}} {
		if t.value != "" && len(t.value) < server.MinTokenLength {
			bad("%s must be at least %d characters", t.flag, server.MinTokenLength)
		}
	}
	tokens, err := loadAPITokens(c.apiTokens)
	if err != nil {
		bad("--api-tokens: %w", err)
	}
	if _, clash := tokens[c.adminToken]; clash && c.adminToken != "" {
		bad("--admin-token must differ from every --api-tokens token")
	}
	c.tokens = tokens
	for _, p := range c.trustedProxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			if _, err := netip.ParseAddr(p); err != nil {
				bad("--trusted-proxies: %q is neither a CIDR such as 10.0.0.0/8 nor an IP address", p)
			}
		}
	}
	if err := checkStoreDSN(c.store); err != nil {
		bad("--store: %w", err)
	}
	return errors.Join(errs...)
}

func runServe(cmd *cobra.Command, _ []string) (err error) {
	c := readServeFlags(cmd)
	if err := c.validate(); err != nil {
		return err
	}
	if c.compat, err = readCompatFlags(cmd); err != nil {
		return err
	}
	idemCfg, idemOn, err := idempotencyConfig(cmd)
	if err != nil {
		return err
	}
	log, err := newLogger(c.logFormat)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	st, err := openFlagStore(ctx, cmd)
	if err != nil {
		return err
	}
	defer closeStore(st, &err)
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
	metrics.SetBuildInfo(buildVersion(), runtime.Version())
	alloc, err := segment.New(st, &segment.Options{AutoCreate: c.autoCreate, DefaultStep: c.defaultStep,
		MaxStep: c.maxStep, MaxTags: c.maxTags, Logger: log, Observer: metrics})
	st.ObserveRetries(metrics.StoreRetried)
	if err != nil {
		return err
	}
	keeper, err := startKeeper(st, idemCfg, idemOn, metrics, log)
	if err != nil {
		_ = alloc.Close()
		return err
	}
	if keeper != nil {
		defer func() { _ = keeper.Close() }() // before the store closes
	}
	cfg := server.Config{
		Idempotency: keeper,
		Segment:     alloc,
		Mode:        c.mode,
		MaxBatch:    c.maxBatch,
		Ready:       segmentReady(st, alloc),
		Logger:      log,
		AccessLog:   c.accessLog,
		Admin:       st,
		Stats:       alloc,
		Ranges:      alloc,
		MaxRange:    c.maxRange,
		AdminToken:  c.adminToken,
		APITokens:   c.tokens,
		Metrics:     metrics,
		Layout:      c.compat.layout,
		Compat:      c.compat.apis,

		MetricsToken:   c.metricsToken,
		TrustedProxies: c.trustedProxies,
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
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.addr, err)
	}
	srv := server.NewHTTPServer(c.addr, h)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	// The one line that says what is running; tests find the address in it.
	log.Info("serving", "addr", ln.Addr().String(), "version", buildVersion(), "mode", c.mode,
		"store", redact(c.store), "admin_api", onOff(c.adminToken != ""), "api_tokens", len(c.tokens),
		"metrics_token", onOff(c.metricsToken != ""), "auto_create_tags", c.autoCreate, "max_tags", c.maxTags,
		"snowflake", c.snowflake, "trusted_proxies", c.trustedProxies)

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

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// loadAPITokens reads --api-tokens: a file when the value names one,
// otherwise the inline form.
func loadAPITokens(v string) (server.APITokens, error) {
	if v == "" {
		return nil, nil
	}
	// The operator names the file on the command line; reading it is
	// the point.
	if b, err := os.ReadFile(v); err == nil { //nolint:gosec // G304, see above
		v = string(b)
	}
	return server.ParseAPITokens(v)
}
