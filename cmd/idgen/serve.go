package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/store"
)

func newServe() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve IDs over HTTP and gRPC",
		Args:  cobra.NoArgs,
		RunE:  runServe,
	}
	f := cmd.Flags()
	f.String("addr", ":8080", "listen address")
	f.String("grpc-addr", "", "listen address of gRPC on grpc-go's own transport, for gRPC clients (e.g. :9090; default: off, gRPC is served on --addr only)")
	f.String("mode", server.ModeSegment, "strategy behind /id/{tag}: segment or snowflake")
	f.Bool("auto-create-tags", true, "create a tag on its first use (turn off in production to refuse typos)")
	int64Flag(f, "default-step", 1000, "step of auto-created tags")
	int64Flag(f, "max-step", 1_000_000, "largest segment a load reserves when the step grows under load")
	intFlag(f, "max-batch", 10000, "largest ?count= accepted")
	int64Flag(f, "max-range", 1_000_000, "largest ?size= of POST /segment/{tag}/range")
	f.Bool("migrate", true, "apply schema migrations at start")
	f.Bool("snowflake", true, "serve /snowflake/{tag} too (leases a worker ID); --mode snowflake needs it")
	int64Flag(f, "worker-id", -1, "static snowflake worker ID (0-1023), held in the store like a lease and never leased to others; -1 leases any free one")
	f.Duration("lease-ttl", 30*time.Second, "snowflake worker lease time to live; renewed every third of it")
	int64Flag(f, "fence-margin", 0, "IDs every tag's max_id moves up per failover counted (at least 2) when the store's history changed (a failover, a restore); 0: 2 x the largest cap or step the store knows x (live instances + 1)")
	f.Duration("shutdown-timeout", 10*time.Second, "how long to drain requests and hand back ranges on SIGTERM")
	f.String("log-format", "text", "log format: text or json")
	f.Bool("access-log", true, "log every request")
	f.String("admin-token", "", "bearer token for /admin/* (without it /admin/* answers 403)")
	f.String("api-tokens", "", "client tokens for the ID endpoints: a file path, or inline TOKEN=tag1,tag2;TOKEN2=*")
	intFlag(f, "max-tags", 10000, "most tags one process serves; past it, new tags get 409 tag_limit_reached (0: no limit)")
	f.Duration("lock-min-ttl", time.Second, "shortest TTL a lock may be asked for (/locks, idgen.v1.LockService); shorter gets 400 invalid_lock_ttl")
	f.Duration("lock-max-ttl", 10*time.Minute, "longest TTL a lock may be asked for; longer gets 400 invalid_lock_ttl")
	f.Duration("lock-max-wait", server.DefaultLockMaxWait, "longest one acquire waits for another owner's lock; a longer wait is cut to it (at most "+server.MaxLockWait.String()+")")
	f.String("lock-store", "", "where lock grants live: empty for the ID store, redis://host:port (rediss:// for TLS, redis+cluster:// for a cluster) for Redis, or none for no lock API")
	intFlag(f, "max-locks", server.DefaultLockMaxNames, "most lock names one process tracks; past it, and once free names are dropped, new names get 409 lock_limit_reached")
	f.String("metrics-token", "", "bearer token /metrics requires (default: /metrics is open)")
	f.StringSlice("trusted-proxies", nil, "CIDRs of proxies whose X-Forwarded-For is believed for the logged client address (default: none)")
	f.Bool("auto-create-opaque", false, "auto-created tags are opaque (needs the opaque key; see idgen opaque keygen)")
	opaqueKeyFlags(f)
	compatFlags(f)
	tlsFlags(f)
	idempotencyFlags(f)
	metricsFlags(f)
	return cmd
}

// serveConfig is the flags of serve, read once.
type serveConfig struct {
	store, addr, grpcAddr, mode, logFormat, adminToken, apiTokens, metricsToken, lockStore string
	lockKind                                                                               string
	autoCreate, migrate, snowflake, accessLog                                              bool
	defaultStep, maxStep, maxRange, workerID, fenceMargin                                  int64
	maxBatch, maxTags, maxLocks                                                            int
	leaseTTL, drain, lockMinTTL, lockMaxTTL, lockMaxWait                                   time.Duration
	// owner names this process in worker_node, on its presence lease and
	// its snowflake worker lease alike (set by serve).
	owner          string
	trustedProxies []string

	tokens    server.APITokens // parsed from apiTokens by validate
	compat    compatConfig     // the layout and compatibility flags
	opaqueKey string           // the opaque key's fingerprint, or "none", for the startup line
	tls       server.TLSFiles  // --tls-cert, --tls-key, --tls-client-ca
	// tlsConfig serves tls, read by runServe before it opens the store;
	// nil for cleartext.
	tlsConfig *tls.Config
	newStore  bool // the SQLite file did not exist before this start
}

func readServeFlags(cmd *cobra.Command) serveConfig {
	f := cmd.Flags()
	var c serveConfig
	c.addr, _ = f.GetString("addr")
	c.grpcAddr, _ = f.GetString("grpc-addr")
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
	c.fenceMargin, _ = f.GetInt64("fence-margin")
	c.drain, _ = f.GetDuration("shutdown-timeout")
	c.logFormat, _ = f.GetString("log-format")
	c.accessLog, _ = f.GetBool("access-log")
	c.adminToken, _ = f.GetString("admin-token")
	c.apiTokens, _ = f.GetString("api-tokens")
	c.maxTags, _ = f.GetInt("max-tags")
	c.maxLocks, _ = f.GetInt("max-locks")
	c.lockStore, _ = f.GetString("lock-store")
	c.lockMinTTL, _ = f.GetDuration("lock-min-ttl")
	c.lockMaxTTL, _ = f.GetDuration("lock-max-ttl")
	c.lockMaxWait, _ = f.GetDuration("lock-max-wait")
	c.metricsToken, _ = f.GetString("metrics-token")
	c.trustedProxies, _ = f.GetStringSlice("trusted-proxies")
	c.store = storeDSN(cmd)
	c.tls = readTLSFlags(f)
	return c
}

// The upper bounds of serve's numeric flags (docs/operations.md).
const (
	// maxStepFlag bounds --default-step, --max-step and --max-range: a
	// tag's step is an INT column in every dialect (segment.Tag.Validate).
	maxStepFlag = math.MaxInt32
	// maxBatchFlag bounds --max-batch: one ?count= answer is built in
	// memory, about 30 bytes per ID, so 100,000 IDs are 3 MB per request.
	maxBatchFlag = 100_000
	// maxTagsFlag bounds --max-tags: each tag holds two buffers and its
	// metric series.
	maxTagsFlag = 1_000_000
	// maxLocksFlag bounds --max-locks: each name is a map entry, and
	// /admin/locks describes every one.
	maxLocksFlag = 1_000_000
	// maxLockTTL bounds --lock-max-ttl: a crashed holder's lock stays
	// taken for up to one TTL.
	maxLockTTL = 24 * time.Hour
	// maxLeaseTTL bounds --lease-ttl: a crashed instance's worker ID
	// stays taken for up to one TTL.
	maxLeaseTTL = 24 * time.Hour
	// maxDrain bounds --shutdown-timeout.
	maxDrain = time.Hour
	// maxFenceMargin bounds --fence-margin, so that a fence's max_id
	// arithmetic keeps headroom below the int64 limit.
	maxFenceMargin = 1 << 62
)

// checkAddr checks --addr without listening: a bare port (8081) would
// otherwise fail only after the schema was migrated and a worker leased.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if _, perr := strconv.ParseUint(port, 10, 16); perr != nil {
			err = perr
		}
	}
	if err != nil {
		return fmt.Errorf("--addr must be host:port or :port, such as :8080 or 127.0.0.1:8080, got %q", addr)
	}
	return nil
}

// validate checks every flag, in flag terms, before serve touches the
// database: a typo must not migrate a schema or lease a worker ID first.
// compatErr is what reading the layout and compatibility flags found.
func (c *serveConfig) validate(compatErr error) error {
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
	for _, n := range []struct {
		flag          string
		v, low, high  int64
		lowIs, highIs string
	}{
		{"--default-step", c.defaultStep, 1, maxStepFlag, "", "a tag's step is an INT column"},
		{"--max-step", c.maxStep, 1, maxStepFlag, "", "the largest step a tag can have"},
		{"--max-batch", int64(c.maxBatch), 1, maxBatchFlag, "", "one answer is built in memory"},
		{"--max-range", c.maxRange, 1, maxStepFlag, "", "the largest step a tag can have"},
		{"--max-tags", int64(c.maxTags), 0, maxTagsFlag, " (no limit)", "each tag costs memory"},
		{"--max-locks", int64(c.maxLocks), 1, maxLocksFlag, "", "each name costs memory and a describe per /admin/locks"},
	} {
		if n.v < n.low || n.v > n.high {
			bad("%s must be from %d%s to %d (%s), got %d", n.flag, n.low, n.lowIs, n.high, n.highIs, n.v)
		}
	}
	if compatErr != nil {
		errs = append(errs, compatErr)
	} else {
		if max := c.compat.layout.MaxWorkerID(); c.workerID < -1 || c.workerID > max {
			l := c.compat.layout
			bad("--worker-id must be -1 (lease one) or 0 to %d, the worker IDs of --snowflake-layout %d/%d/%d, got %d",
				max, l.TimeBits(), l.WorkerBits(), l.SequenceBits(), c.workerID)
		} else if c.workerID >= 0 {
			if _, err := c.compat.staticConfig(c.workerID); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if c.leaseTTL < time.Second || c.leaseTTL > maxLeaseTTL {
		bad("--lease-ttl must be from 1s to %v, got %v", maxLeaseTTL, c.leaseTTL)
	}
	// The lock package's own bounds (lock.New): a renewal every third of
	// the TTL must be possible at all.
	if c.lockMinTTL < 10*time.Millisecond || c.lockMaxTTL < c.lockMinTTL || c.lockMaxTTL > maxLockTTL {
		bad("--lock-min-ttl and --lock-max-ttl must satisfy 10ms ≤ min ≤ max ≤ %v, got %v and %v", maxLockTTL, c.lockMinTTL, c.lockMaxTTL)
	}
	if c.lockMaxWait <= 0 || c.lockMaxWait > server.MaxLockWait {
		bad("--lock-max-wait must be above 0s and at most %v (a wait is answered within the HTTP write timeout), got %v", server.MaxLockWait, c.lockMaxWait)
	}
	if c.drain < 0 || c.drain > maxDrain {
		bad("--shutdown-timeout must be from 0s to %v, got %v", maxDrain, c.drain)
	}
	if c.fenceMargin < 0 || c.fenceMargin > maxFenceMargin {
		bad("--fence-margin must be from 0 (automatic) to %d, got %d", int64(maxFenceMargin), c.fenceMargin)
	}
	if err := checkAddr(c.addr); err != nil {
		errs = append(errs, err)
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
	if err := checkLockStore(c.lockStore); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, checkTLSFlags(c.tls)...)
	return errors.Join(errs...)
}

func runServe(cmd *cobra.Command, _ []string) (err error) {
	c := readServeFlags(cmd)
	var compatErr error
	c.compat, compatErr = readCompatFlags(cmd)
	if err := c.validate(compatErr); err != nil {
		return err
	}
	op, err := readServeOpaque(cmd, c.metricsToken)
	if err != nil {
		return err
	}
	key, autoOpaque := op.key, op.auto
	c.opaqueKey = opaqueKeyName(key)
	metricsCfg, err := readMetricsFlags(cmd)
	if err != nil {
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
	if key != nil {
		warnSoftwareAES(log)
	}
	for _, w := range unknownEnv(cmd, os.Environ()) {
		log.Warn(w)
	}
	if c.tlsConfig, err = listenerTLS(c.tls, log); err != nil {
		return err
	}
	if op.warning != "" {
		log.Warn(op.warning)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Listen before the store is touched: a busy port must fail before a
	// schema is migrated or a worker ID leased. Connections that arrive
	// meanwhile wait in the backlog until the server starts.
	ln, err := listen(ctx, c.addr)
	if err != nil {
		return err
	}
	defer func() { _ = ln.Close() }() // closed by Shutdown already when serving ran
	var gln net.Listener
	if c.grpcAddr != "" {
		if gln, err = listenFlag(ctx, c.grpcAddr, "--grpc-addr (IDGEN_GRPC_ADDR)"); err != nil {
			return err
		}
		defer func() { _ = gln.Close() }()
	}
	locks, err := openLockStore(ctx, c.lockStore, log)
	if err != nil {
		return err
	}
	defer func() { _ = locks.close() }() // after the server stopped answering
	newPath, newStore := storeFileMissing(c.store)
	st, err := openFlagStore(ctx, cmd)
	if err != nil {
		return err
	}
	defer closeStore(st, &err)
	if newStore {
		log.Warn("the SQLite file did not exist and was created: every tag starts from its first ID; if you meant an existing store, check --store",
			"path", newPath)
	}
	c.newStore = newStore
	locks = locks.forStore(st)
	c.lockKind = locks.kind
	if c.migrate {
		v, err := st.Migrate(ctx, nil)
		if err != nil {
			return err
		}
		log.Info("schema ready", "version", v)
	}
	if name, _ := cmd.Flags().GetString("sequence-table"); name == store.LeafAlloc {
		if err := checkSharedTable(ctx, st, log); err != nil {
			return err
		}
	}

	metrics, err := server.NewMetricsConfig(metricsCfg)
	if err != nil {
		return err
	}
	metrics.SetBuildInfo(buildVersion(), runtime.Version())
	if err := startFencing(ctx, st, c, log, metrics); err != nil {
		return err
	}
	// Every instance holds a presence lease, so that a fence counts it and
	// waits for its check-in (see store.Presence): also one whose
	// snowflake worker lease is lost, or whose claims fail, while it goes
	// on handing out segment IDs. The store would claim it at the first
	// reservation; claimed here, a failure stops the start. The worker
	// lease has the store's owner too, so that neither holds this
	// process's own reservations back.
	c.owner = st.Owner()
	presence, err := st.Presence(ctx, store.PresenceConfig{TTL: c.leaseTTL, Logger: log})
	if err != nil {
		return err
	}
	log.Info("presence lease", "worker_id", presence.WorkerID(), "owner", c.owner)
	defer func() { // on the early returns; after the shutdown's own Close, a no-op
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = presence.Close(cctx)
	}()
	if c.tlsConfig != nil {
		metrics.WatchTLS(c.tlsConfig)
	}
	alloc, err := segment.New(st, segment.Options{AutoCreate: c.autoCreate, DefaultStep: c.defaultStep,
		DefaultOpaque: autoOpaque, MaxStep: c.maxStep, MaxTags: c.maxTags, Logger: log, Observer: metrics})
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
	// Every route that hands out segment IDs goes through gen, so an
	// opaque tag is served the same way by /id, /segment, the batches, the
	// ranges and the Leaf and tinyid routes.
	var tags opaque.Tags = st
	if name, _ := cmd.Flags().GetString("sequence-table"); name == store.LeafAlloc {
		tags = leafTags{st}
	}
	gen := opaque.NewGenerator(alloc, tags, key)
	cfg := server.Config{
		Idempotency: keeper,
		Segment:     gen,
		Mode:        c.mode,
		MaxBatch:    c.maxBatch,
		Ready:       segmentReady(st, alloc),
		Logger:      log,
		AccessLog:   c.accessLog,
		Admin:       st,
		Stats:       alloc,
		Ranges:      gen,
		OpaqueKey:   key,
		MaxRange:    c.maxRange,
		AdminToken:  c.adminToken,
		APITokens:   c.tokens,
		Metrics:     metrics,
		Layout:      c.compat.layout,
		Compat:      c.compat.apis,

		MetricsToken:      c.metricsToken,
		TrustedProxies:    c.trustedProxies,
		RequireClientCert: c.tls.ClientCA != "",
		Locks: server.LockConfig{Backend: locks.backend, MinTTL: c.lockMinTTL, MaxTTL: c.lockMaxTTL,
			MaxWait: c.lockMaxWait, MaxNames: c.maxLocks},
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
	// One deadline, --shutdown-timeout from SIGTERM, covers the whole
	// shutdown: the drain, the worker lease's release and the hand-back,
	// so that the chart's terminationGracePeriodSeconds > preStop +
	// --shutdown-timeout is what the process needs.
	deadline := time.Now().Add(c.drain)
	if err == nil {
		deadline, err = serveUntilDone(ctx, c, ln, gln, h, log)
	}
	// Drained: release the worker lease, then hand back unused ranges,
	// while the store is still open, in what is left of the deadline.
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if sf != nil {
		if e := sf.close(sctx); e != nil {
			log.Warn("worker lease release incomplete", "err", e)
		}
	}
	if e := alloc.Shutdown(sctx); e != nil {
		log.Warn("hand-back incomplete", "err", e)
	}
	// After the hand-back: until it ends, this instance holds ranges.
	if e := presence.Close(sctx); e != nil {
		log.Warn("presence lease release incomplete", "err", e)
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
func segmentReady(st *store.Store, alloc *segment.Allocator) func(context.Context) error {
	return func(ctx context.Context) error {
		if alloc.Buffered() > 0 {
			return nil
		}
		return st.Ping(ctx)
	}
}

// listen opens --addr, saying which flag to change when it cannot.
func listen(ctx context.Context, addr string) (net.Listener, error) {
	return listenFlag(ctx, addr, "--addr (IDGEN_ADDR)")
}

// listenFlag opens addr, the value of flag.
func listenFlag(ctx context.Context, addr, flag string) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("listen on %s: the port is in use by another process: stop it, or pick another address with %s", addr, flag)
	case err != nil:
		return nil, fmt.Errorf("listen on %s: %w; check %s", addr, err, flag)
	}
	return ln, nil
}

// serveUntilDone serves h on ln, and its gRPC API on grpc-go's transport
// on gln unless gln is nil, until ctx ends; then it drains: health turns
// NOT_SERVING and Watch streams end (Server.Drain), and both servers
// finish their calls in flight. It returns the deadline of the whole
// shutdown, --shutdown-timeout from when it began, which the drain shares
// with what follows it.
func serveUntilDone(ctx context.Context, c serveConfig, ln, gln net.Listener, h *server.Server, log *slog.Logger) (time.Time, error) {
	srv := server.NewHTTPServer(c.addr, h)
	// net/http's own lines (TLS handshake errors, from port scanners
	// mostly) go through the logger, so --log-format json is all JSON.
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	errc := make(chan error, 2)
	if c.tlsConfig != nil {
		srv.TLSConfig = c.tlsConfig
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	var gs *grpc.Server
	grpcAddr := "off"
	if gln != nil {
		gs = h.NewGRPCServer(c.tlsConfig)
		grpcAddr = gln.Addr().String()
		go func() {
			if err := gs.Serve(gln); err != nil {
				errc <- err
			}
		}()
	}
	// The one line that says what is running; tests find the address in it.
	// auth=none says that the ID endpoints answer anyone who can reach the
	// address: right for a quick start on a laptop, not for production
	// (docs/operations.md, Hardening). The warning is left out where only
	// this machine (a loopback address) or only holders of a client
	// certificate (mutual TLS) reach the ID endpoints.
	auth := "api-tokens"
	if len(c.tokens) == 0 {
		auth = "none"
	}
	if auth == "none" && c.tls.ClientCA == "" && !loopback(ln.Addr()) {
		log.Warn("the ID endpoints are open without auth: anyone who can reach the listen address draws IDs of any tag; set --api-tokens, or listen on 127.0.0.1",
			"addr", ln.Addr().String())
	}
	log.Info("serving", "addr", ln.Addr().String(), "version", buildVersion(), "mode", c.mode,
		"store", redact(c.store), "new_store", c.newStore, "auth", auth, "admin_api", onOff(c.adminToken != ""), "api_tokens", len(c.tokens),
		"metrics_token", onOff(c.metricsToken != ""), "auto_create_tags", c.autoCreate, "max_tags", c.maxTags,
		"snowflake", c.snowflake, "trusted_proxies", c.trustedProxies, "opaque_key", c.opaqueKey, "tls", tlsMode(c.tls), "grpc", "on", "grpc_addr", grpcAddr,
		"locks", c.lockKind)

	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("shutting down", "timeout", c.drain)
	}
	h.Drain()
	// The drain may not take it all: a fifth of it, at most 2 s, is kept
	// for the lease release and the hand-back, which otherwise a stream
	// held open to the end would starve.
	deadline := time.Now().Add(c.drain)
	sctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-min(c.drain/5, 2*time.Second)))
	defer cancel()
	stopped := make(chan struct{})
	if gs != nil {
		go func() { gs.GracefulStop(); close(stopped) }()
	} else {
		close(stopped)
	}
	if e := srv.Shutdown(sctx); e != nil {
		log.Warn("drain incomplete", "err", e)
	}
	select {
	case <-stopped:
	case <-sctx.Done():
		log.Warn("gRPC drain incomplete", "err", sctx.Err())
		gs.Stop()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return deadline, err
	}
	return deadline, nil
}

// loopback reports whether addr is a loopback address, which only this
// machine reaches.
func loopback(addr net.Addr) bool {
	ap, err := netip.ParseAddrPort(addr.String())
	return err == nil && ap.Addr().IsLoopback()
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
	b, err := os.ReadFile(v) //nolint:gosec // G304, see above
	switch {
	case err == nil:
		v = string(b)
	case !strings.Contains(v, "="):
		// No inline entry has no "=": v names a file, and what is
		// wrong is the file, not the syntax of its name.
		return nil, fmt.Errorf("cannot read the token file: %w (inline tokens are TOKEN=tag1,tag2;TOKEN2=*)", err)
	}
	return server.ParseAPITokens(v)
}
