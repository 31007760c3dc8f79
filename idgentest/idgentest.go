// Package idgentest runs a real idgen inside a Go test, for the unit
// tests of programs that use idgen: NewServer serves the real HTTP API
// (package server) on an httptest.Server, and NewAllocator gives library
// users a segment allocator. Both keep their state in a SQLite database
// in the test's temporary directory, so they need no Docker and leave no
// file behind; everything is closed by t.Cleanup.
//
// The server is built on gin, which in its debug mode lists every route on
// stdout when a server is made. gin has no per-engine switch for that:
// gin.New and every route registration consult one process-wide mode,
// and its print hooks (DebugPrintRouteFunc, DebugPrintFunc) are
// process-wide variables too. In a test binary gin means to default to
// its quiet test mode, but it settles its mode in an init function that
// runs before the testing flags exist, so it lands in debug mode. When
// GIN_MODE is unset and the mode is still that default, NewServer lets
// gin settle it again (gin.SetMode("")), which in a test binary is test
// mode: no [GIN-debug] lines in go test -v. A mode the test chose, with
// GIN_MODE or gin.SetMode to anything but debug, is left alone;
// GIN_MODE=debug brings the route listing back. Package server itself
// never sets gin's mode.
//
// For a test against the container image instead, see package
// idgencontainer.
package idgentest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/sqlite"
)

// Options configure NewServer. The zero value (or nil) is a segment-mode
// server that creates tags on first use, like `idgen serve`.
type Options struct {
	// Mode is what /id/{tag} serves: "segment" (zero) or "snowflake".
	// /segment/{tag} and /snowflake/{tag} are served either way.
	Mode string
	// AdminToken guards /admin/*. Empty: /admin/* answers 403.
	AdminToken string
	// NoAutoCreate refuses unknown tags with 404 tag_not_found, as
	// `idgen serve --auto-create-tags=false` does; create them through
	// POST /admin/tags (which needs AdminToken).
	NoAutoCreate bool
	// DefaultStep is the step of auto-created tags. Zero means 1000.
	DefaultStep int64
	// Logger receives the server's logs. Nil discards them.
	Logger *slog.Logger
	// IdempotencyTTL is how long the server keeps an Idempotency-Key,
	// as `idgen serve --idempotency-ttl`. Zero means 24h. Keys are kept
	// in the same SQLite file, as `idgen serve` keeps them.
	IdempotencyTTL time.Duration
	// IdempotencyNow is the clock of the keys' expiry, so that a test
	// lets a key expire without waiting. Nil means time.Now.
	IdempotencyNow func() time.Time
	// LockMinTTL is the shortest lock TTL the server accepts, as `idgen
	// serve --lock-min-ttl`, so that a test lets a lock lapse in
	// milliseconds. Zero means 1s. At least 10ms.
	LockMinTTL time.Duration
}

// Server is a running idgen HTTP server.
type Server struct {
	// URL is the base URL, http://127.0.0.1:PORT: HTTP/1.1, and HTTP/2
	// without TLS (h2c) for the gRPC API beside it (client.WithGRPC).
	URL string
	// GRPCAddr is the address, 127.0.0.1:PORT, of the gRPC API on
	// grpc-go's own transport, as `idgen serve --grpc-addr` serves it
	// (client.WithGRPCAddr).
	GRPCAddr string

	t          testing.TB
	adminToken string
}

// NewServer starts the real idgen server with both modes over a fresh
// SQLite store and stops it when the test ends: requests are drained,
// the worker lease released and unused ranges handed back, as on
// SIGTERM. It fails the test if the server cannot start.
func NewServer(t testing.TB, opts *Options) *Server {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Mode == "" {
		o.Mode = server.ModeSegment
	}
	if o.DefaultStep == 0 {
		o.DefaultStep = 1000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	settleGinMode()
	ctx := context.Background()
	st := openStore(t)

	metrics := server.NewMetrics()
	alloc, err := segment.New(st, segment.Options{AutoCreate: !o.NoAutoCreate, DefaultStep: o.DefaultStep,
		Logger: o.Logger, Observer: metrics})
	if err != nil {
		t.Fatalf("idgentest: %v", err)
	}
	t.Cleanup(func() { shutdown(t, "hand back ranges", alloc.Shutdown) })

	leased, err := snowflake.NewLeased(ctx, st.Leases(), snowflake.LeasedConfig{Logger: o.Logger})
	if err != nil {
		t.Fatalf("idgentest: snowflake worker lease: %v", err)
	}
	t.Cleanup(func() { shutdown(t, "release the worker lease", leased.Shutdown) })
	worker := func() server.WorkerStatus {
		return server.WorkerStatus{WorkerID: leased.WorkerID(), LeaseExpiresAt: leased.LeaseExpiry(),
			LastTimestamp: leased.LastTimestamp(), Err: leased.Ready()}
	}
	metrics.WatchWorker(worker)

	keeper, err := idempotency.New(st.Idempotency(), idempotency.Config{TTL: o.IdempotencyTTL, Now: o.IdempotencyNow, Logger: o.Logger, Observer: metrics})
	if err != nil {
		t.Fatalf("idgentest: %v", err)
	}
	keeper.Start()
	t.Cleanup(func() { _ = keeper.Close() })

	h, err := server.New(server.Config{
		Idempotency: keeper,
		Segment:     alloc,
		Snowflake:   leased,
		Layout:      leased.Layout(),
		Worker:      worker,
		Mode:        o.Mode,
		Ready:       ready(o.Mode, st, alloc, leased),
		Logger:      o.Logger,
		Admin:       st,
		Stats:       alloc,
		Ranges:      alloc,
		AdminToken:  o.AdminToken,
		Metrics:     metrics,
		Locks:       server.LockConfig{Backend: st.Locks(), MinTTL: o.LockMinTTL},
	})
	if err != nil {
		t.Fatalf("idgentest: %v", err)
	}
	hs := httptest.NewUnstartedServer(h)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetHTTP1(true)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	t.Cleanup(hs.Close) // runs first: no request outlives the generators
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("idgentest: %v", err)
	}
	gs := h.NewGRPCServer(nil)
	go func() { _ = gs.Serve(ln) }() // returns once Stop closes the listener
	t.Cleanup(gs.Stop)
	return &Server{URL: hs.URL, GRPCAddr: ln.Addr().String(), t: t, adminToken: o.AdminToken}
}

// settleGinMode re-runs gin's own choice of its default mode, now that
// the testing flags are registered (see the package comment).
func settleGinMode() {
	if os.Getenv(gin.EnvGinMode) == "" && gin.Mode() == gin.DebugMode {
		gin.SetMode("")
	}
}

// AdminToken returns the token /admin/* accepts.
func (s *Server) AdminToken() string { return s.adminToken }

// Client returns a client of the server. Its Next and NextN use
// /id/{tag}, the server's mode, as every client.Client does unless
// client.WithMode among opts picks another route.
func (s *Server) Client(opts ...client.Option) *client.Client {
	s.t.Helper()
	c, err := client.New(s.URL, opts...)
	if err != nil {
		s.t.Fatalf("idgentest: %v", err)
	}
	return c
}

// NewAllocator returns a segment allocator over a fresh SQLite store
// that creates tags on first use, for programs that embed idgen as a
// library. It is shut down when the test ends.
func NewAllocator(t testing.TB) *segment.Allocator {
	t.Helper()
	a, err := segment.New(openStore(t), segment.Options{AutoCreate: true})
	if err != nil {
		t.Fatalf("idgentest: %v", err)
	}
	t.Cleanup(func() { shutdown(t, "hand back ranges", a.Shutdown) })
	return a
}

// openStore opens a migrated SQLite store in the test's temporary
// directory. Cleanups run last-in first-out, so the store closes after
// everything registered later has stopped using it, and the directory
// (registered first by TempDir) is removed after that.
func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "idgen.db"))
	if err != nil {
		t.Fatalf("idgentest: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("idgentest: close store: %v", err)
		}
	})
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatalf("idgentest: %v", err)
	}
	return st
}

// ready answers like `idgen serve`'s /readyz: buffered IDs or a store
// that answers, and in snowflake mode a generator that may issue.
func ready(mode string, st *sqlite.Store, alloc *segment.Allocator, leased *snowflake.Leased) func(context.Context) error {
	return func(ctx context.Context) error {
		if alloc.Buffered() == 0 {
			if err := st.Ping(ctx); err != nil {
				return err
			}
		}
		if mode == server.ModeSnowflake {
			return leased.Ready()
		}
		return nil
	}
}

func shutdown(t testing.TB, what string, fn func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fn(ctx); err != nil {
		t.Errorf("idgentest: %s: %v", what, err)
	}
}
