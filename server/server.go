package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gin-gonic/gin/binding"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/snowflake"
)

// Modes a server can serve /id/{tag} with.
const (
	ModeSegment   = "segment"
	ModeSnowflake = "snowflake"
)

// APIDocument is where the HTTP API is described, as GET / and the
// not_found answer name it.
const APIDocument = "https://github.com/idgen/idgen/blob/main/api/openapi.yaml"

// ErrInvalidConfig is returned by New for a Config it cannot use. The
// wrapping error says what to change.
var ErrInvalidConfig = errors.New("server: invalid config")

// Config configures a Server. It is a value, checked once by New: zero
// fields take the defaults noted, and a field New cannot use is an error
// wrapping ErrInvalidConfig.
type Config struct {
	// Segment serves /segment/{tag}. Required.
	Segment idgen.Generator
	// Snowflake serves /snowflake/{tag}. Nil answers those routes with
	// 404 mode_disabled.
	Snowflake idgen.Generator
	// Mode picks the generator behind /id/{tag}: ModeSegment (default)
	// or ModeSnowflake.
	Mode string
	// MaxBatch bounds ?count=. Default 10000.
	MaxBatch int
	// Ready reports whether the server can issue IDs; /readyz answers 503
	// while it returns an error. Nil means always ready.
	Ready func(ctx context.Context) error
	// Logger receives errors and access logs. Default slog.Default().
	Logger *slog.Logger
	// AccessLog writes one log line per request.
	AccessLog bool

	// Admin enables the tag endpoints of the admin API.
	Admin TagAdmin
	// Stats feeds /admin/segments; usually the *segment.Allocator.
	Stats SegmentStats
	// Worker reports the snowflake worker for /admin/segments; nil when
	// snowflake mode is off.
	Worker func() WorkerStatus
	// AdminToken guards /admin/*. Empty: /admin/* answers 403.
	AdminToken string
	// APITokens, when not empty, restrict the ID endpoints to the tags
	// each token names.
	APITokens APITokens
	// Metrics, when set, is served at /metrics and fed by every request.
	Metrics *Metrics
	// Ranges serves POST /segment/{tag}/range; usually the
	// *segment.Allocator. Nil disables the route.
	Ranges RangeReserver
	// MaxRange bounds ?size= of range requests. Default 1,000,000.
	MaxRange int64
	// Layout decodes IDs at /snowflake/decode/{id}. The zero Layout is
	// the default one.
	Layout snowflake.Layout
	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string
	// TrustedProxies lists the CIDRs (or addresses) of proxies whose
	// X-Forwarded-For is believed for the client address in logs. None
	// by default, so a caller cannot choose the address that is logged.
	TrustedProxies []string
	// Compat serves other ID services' APIs too (compat.go).
	Compat Compat
	// OpaqueKey, when set, lets the admin API create opaque tags and
	// decode their IDs (GET /admin/opaque/{tag}/{id}). Serving opaque
	// tags is Segment's work: wrap the allocator in an opaque.Generator
	// with the same key, and pass that as Segment and Ranges.
	OpaqueKey *opaque.Key
	// Idempotency answers requests with an Idempotency-Key header
	// (idempotency.go). Nil answers them with 400 idempotency_disabled.
	// The caller starts and closes it.
	Idempotency *idempotency.Keeper
	// RequireClientCert refuses every request that did not come over TLS
	// with a verified client certificate (mutual TLS), except the probes:
	// /healthz, /readyz and grpc.health.v1. HTTP answers 401
	// client_certificate_required, gRPC UNAUTHENTICATED. Pair it with a
	// TLSConfig whose TLSFiles.ClientCA is set, which verifies a
	// certificate at the handshake when one is sent.
	RequireClientCert bool
	// Locks serves /locks, /admin/locks and idgen.v1.LockService
	// (locks.go). Without a Backend those answer 404 locks_disabled.
	Locks LockConfig
}

// Server is the HTTP API and, on the same handler, the gRPC API. It is an
// http.Handler.
type Server struct {
	// cfg is the Config New was given, checked and with its defaults
	// filled in; nothing changes it after New.
	cfg    Config
	engine *gin.Engine
	rpc    http.Handler
	// gens are cfg's generators by mode: the one lookup every ID route
	// makes.
	gens map[string]idgen.Generator
	auth *authz
	// svc issues IDs and reserves ranges for every transport.
	svc *service
	// locks serves the lock API for every transport; nil without a
	// lock backend.
	locks *lockService

	metricsToken *token

	// drained is closed by Drain, once (drainOnce).
	drained   chan struct{}
	drainOnce sync.Once

	// bodies holds *[]byte buffers of batch answers (writeIDs).
	bodies sync.Pool
}

// New checks cfg and builds the routes.
func New(cfg Config) (*Server, error) {
	if cfg.Segment == nil {
		return nil, fmt.Errorf("%w: Segment is required", ErrInvalidConfig)
	}
	if err := checkTokens(cfg.AdminToken, cfg.MetricsToken, cfg.APITokens); err != nil {
		return nil, err
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeSegment
	}
	if cfg.Mode != ModeSegment && cfg.Mode != ModeSnowflake {
		return nil, fmt.Errorf("%w: Mode must be segment or snowflake, got %q", ErrInvalidConfig, cfg.Mode)
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 10000
	}
	if cfg.MaxBatch < 1 {
		return nil, fmt.Errorf("%w: MaxBatch must be at least 1, got %d", ErrInvalidConfig, cfg.MaxBatch)
	}
	if cfg.MaxRange == 0 {
		cfg.MaxRange = 1_000_000
	}
	if cfg.Ready == nil {
		cfg.Ready = func(context.Context) error { return nil }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		cfg:  cfg,
		gens: map[string]idgen.Generator{ModeSegment: cfg.Segment},
		auth: newAuthz(cfg.AdminToken, cfg.APITokens),

		drained: make(chan struct{}),
	}
	if cfg.Snowflake != nil {
		s.gens[ModeSnowflake] = cfg.Snowflake
	}
	s.svc = &service{gens: s.gens, ranges: cfg.Ranges, maxRange: cfg.MaxRange,
		keeper: cfg.Idempotency, scope: s.scope, metrics: cfg.Metrics}
	s.svc.releaser, _ = cfg.Ranges.(RangeReleaser)
	var err error
	if s.locks, err = newLockService(cfg.Locks); err != nil {
		return nil, err
	}
	if s.locks != nil && cfg.Metrics != nil {
		s.locks.obs = cfg.Metrics
	}
	if s.gens[cfg.Mode] == nil {
		return nil, fmt.Errorf("%w: Mode %s needs its generator in Config", ErrInvalidConfig, cfg.Mode)
	}
	if cfg.MetricsToken != "" {
		d := digest(cfg.MetricsToken)
		s.metricsToken = &d
	}
	if cfg.Metrics != nil {
		cfg.Metrics.watch(cfg.Stats, cfg.Ready)
	}
	if err := s.routes(); err != nil {
		return nil, err
	}
	s.rpc = s.rpcHandler()
	return s, nil
}

// Routes lists the registered routes as method and gin path pattern, for
// documentation checks.
func (s *Server) Routes() [][2]string {
	var out [][2]string
	for _, r := range s.engine.Routes() {
		out = append(out, [2]string{r.Method, r.Path})
	}
	return out
}

// ServeHTTP implements http.Handler: gRPC, gRPC-Web and Connect calls go
// to the gRPC API (grpc.go), everything else to gin.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isRPCPath(r.URL.Path) {
		s.rpc.ServeHTTP(w, r)
		return
	}
	s.engine.ServeHTTP(w, r)
}

func (s *Server) routes() error {
	e := gin.New()
	if err := e.SetTrustedProxies(s.cfg.TrustedProxies); err != nil {
		return fmt.Errorf("%w: TrustedProxies: %w", ErrInvalidConfig, err)
	}
	e.HandleMethodNotAllowed = true
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.Use(requestID)
	if s.cfg.AccessLog {
		e.Use(accessLog(s.cfg.Logger))
	}
	if s.cfg.Metrics != nil {
		e.Use(s.cfg.Metrics.observe)
	}
	e.Use(s.recover)
	if s.cfg.RequireClientCert {
		e.Use(s.requireClientCert)
	}
	// No-store too: a HEAD or a POST of /id/{tag} (curl -sI) lands
	// here, and an unknown route's answer is no one's to keep either.
	e.NoRoute(func(c *gin.Context) { noStore(c); s.writeError(c, errNotFound) })
	e.NoMethod(func(c *gin.Context) { noStore(c); s.writeError(c, errMethodNotAllowed) })

	e.GET("/id/:tag", noStore, s.requireTag, s.ids(s.cfg.Mode))
	e.GET("/segment/:tag", noStore, s.requireTag, s.ids(ModeSegment))
	e.GET("/snowflake/:tag", noStore, s.requireTag, s.ids(ModeSnowflake))
	e.POST("/segment/:tag/range", noStore, s.noKeys, s.requireTag, s.reserveRange)
	e.POST("/segment/:tag/range/release", noStore, s.noKeys, s.requireTag, s.releaseRange)
	e.GET("/id/decode/:value", s.decodeReadable)
	e.GET("/snowflake/decode/:id", s.decodeSnowflake)
	// A first request to the bare address learns where the API is
	// described, rather than getting 404.
	e.GET("/", func(c *gin.Context) {
		c.PureJSON(http.StatusOK, gin.H{"service": "idgen", "api_document": APIDocument, "grpc": "idgen.v1.IDService and idgen.v1.LockService (api/idgen/v1/idgen.proto), on this port"})
	})
	e.GET("/healthz", func(c *gin.Context) { c.PureJSON(http.StatusOK, gin.H{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	if s.cfg.Metrics != nil {
		e.GET("/metrics", s.requireMetrics, gin.WrapH(s.cfg.Metrics.handler()))
	}

	admin := e.Group("/admin", s.requireAdmin)
	admin.GET("/tags", s.listTags)
	admin.POST("/tags", s.createTag)
	admin.PATCH("/tags/:tag", s.patchTag)
	admin.GET("/segments", s.segments)
	admin.GET("/opaque/:tag/:id", s.decodeOpaque)
	admin.GET("/locks", s.listLocks)
	e.POST("/locks/:name", noStore, s.acquireLock)
	e.POST("/locks/:name/renew", noStore, s.renewLock)
	e.DELETE("/locks/:name", noStore, s.releaseLock)
	e.GET("/locks/:name", noStore, s.describeLock)
	s.compatRoutes(e, s.cfg.Compat)
	if s.auth.admin != nil {
		registerUI(e)
	} else {
		// The page shows /admin/segments, which answers 403 without an
		// admin token: an empty page that looks broken helps no one.
		e.GET("/ui", s.uiDisabled)
		e.GET("/ui/*file", s.uiDisabled)
	}
	s.engine = e
	return nil
}

// noStore marks the answer of a route that issues IDs, errors included,
// as one no cache may keep: every call consumes IDs, so a cached answer
// would hand one caller's IDs to the next. Caches that key on the URL
// alone (nginx ignores Authorization, CloudFront applies its default TTL
// to answers without Cache-Control) otherwise repeat IDs. It runs first
// in the route's chain, so the refusals of requireTag carry it too.
//
// The key is set in the map directly, already canonical: gin's c.Header
// goes through Header.Set, which canonicalises and validates the key on
// every call, a tenth of this server's own time per request in the
// profile of GET /id/{tag}.
func noStore(c *gin.Context) { c.Writer.Header()["Cache-Control"] = []string{"no-store"} }

// recover turns a panic into a logged 500 with the standard body, never
// a stack trace in the response.
func (s *Server) recover(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v) // net/http's way to abort a response; it handles it
			}
			s.fail(c, errInternal, fmt.Errorf("panic: %v", v))
		}
	}()
	c.Next()
}

// ids serves one or count IDs of the tag in the path, from the generator
// of mode, as JSON or, with Accept: text/plain, as bare decimals.
func (s *Server) ids(mode string) gin.HandlerFunc {
	// The generator of a route is fixed once New returns: look it up
	// once, not per request.
	g := s.gens[mode]
	return func(c *gin.Context) {
		if g == nil {
			s.writeError(c, errModeDisabled)
			return
		}
		tag := c.Param("tag")
		ctx := c.Request.Context()
		// Most requests have neither an Accept header nor a query: skip
		// parsing what is not there.
		text := len(c.Request.Header["Accept"]) > 0 &&
			c.NegotiateFormat(binding.MIMEJSON, binding.MIMEPlain) == binding.MIMEPlain
		var q url.Values
		if c.Request.URL.RawQuery != "" {
			q = c.Request.URL.Query() // parsed once: count and format both live here
		}
		format, err := parseFormat(q)
		if err != nil {
			s.writeError(c, err)
			return
		}

		counts, many := q["count"]
		n := 1
		if many {
			if n, err = s.parseCount(counts); err != nil {
				s.writeError(c, err)
				return
			}
		}
		r := keyedRequest{mode: mode, tag: tag, format: format, text: text, single: !many, n: n}
		var one [1]int64
		ids, ans, replayed, err := s.svc.next(ctx, g, r, c.Request.Header, one[:0], func(ids []int64) (idempotency.Answer, error) {
			ct, b, err := idsBody(nil, r.tag, r.format, r.text, r.single, ids)
			return idempotency.Answer{Status: http.StatusOK, ContentType: ct, Body: b}, err
		})
		switch {
		case err != nil:
			s.writeError(c, err)
			return
		case ans != nil:
			if replayed {
				c.Writer.Header()[idempotency.ReplayedHeader] = []string{"true"}
			}
			writeAnswer(c, *ans)
			return
		}
		s.writeIDs(c, tag, format, text, !many, ids...)
	}
}

// readyTimeout bounds a readiness check of /readyz or grpc.health.v1.
const readyTimeout = 2 * time.Second

func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), readyTimeout)
	defer cancel()
	if err := s.cfg.Ready(ctx); err != nil {
		s.fail(c, errNotReady, err)
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"status": "ready"})
}
