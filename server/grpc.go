package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/idgen/idgen"
	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/readable"
)

// The gRPC API (api/idgen/v1/idgen.proto) is served by connect-go
// handlers beside gin, on the same port and through the same http.Server:
// gRPC and gRPC-Web over HTTP/2 (cleartext or TLS) and HTTP/1.1, and the
// Connect protocol over either. Requests whose path is /package.Service/…
// go to them (isRPCPath); all others go to gin. Handlers return errors as
// the HTTP handlers do; one interceptor maps them with classify, the
// mapping HTTP uses, into a gRPC status with the idgen code in a
// google.rpc.ErrorInfo, so both APIs answer a mistake the same way.

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail of every
// error the gRPC API decides; its reason is the stable idgen error code.
const ErrorDomain = "idgen"

// RPCCompressMinBytes is the smallest response the gRPC API compresses
// for a client that accepts gzip (every connect-go and grpc-go client
// does). connect-go compresses every response by default; for messages of
// a few dozen bytes that costs most of a call's CPU time (a third of it
// in a profile of unary Next) and saves nothing. Batches of more than
// about 1,500 IDs are still compressed.
const RPCCompressMinBytes = 16 << 10

// rpcMaxMessage bounds a request message: the largest one the API takes
// is a few dozen bytes.
const rpcMaxMessage = 64 << 10

var errInvalidMode = &apiError{http.StatusBadRequest, "invalid_mode", "mode must be MODE_UNSPECIFIED (the server's default), MODE_SEGMENT or MODE_SNOWFLAKE"}

// rpcProcedures are the procedures served, by service prefix: each has
// series of its own in idgen_grpc_request_duration_seconds, and any other
// path is counted as "unmatched".
var rpcProcedures = map[string][]string{
	"/" + idgenv1connect.IDServiceName + "/": {idgenv1connect.IDServiceNextProcedure, idgenv1connect.IDServiceReserveRangeProcedure,
		idgenv1connect.IDServiceDecodeSnowflakeProcedure, idgenv1connect.IDServiceDecodeReadableProcedure,
		idgenv1connect.IDServiceReleaseRangeProcedure},
	"/grpc.health.v1.Health/":                    {"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"},
	"/grpc.reflection.v1.ServerReflection/":      {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"},
	"/grpc.reflection.v1alpha.ServerReflection/": {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"},
}

// isRPCPath reports whether path names a gRPC procedure,
// /package.Service/Method: its first segment has a dot, which no gin
// route's has.
func isRPCPath(path string) bool {
	if len(path) < 4 || path[0] != '/' {
		return false
	}
	end := strings.IndexByte(path[1:], '/')
	return end > 0 && strings.IndexByte(path[1:1+end], '.') >= 0
}

// rpcHandler builds the gRPC services: idgen.v1.IDService, grpc.health.v1
// and server reflection (v1 and v1alpha, which older grpcurl asks for).
func (s *Server) rpcHandler() http.Handler {
	opts := []connect.HandlerOption{
		connect.WithInterceptors(rpcInterceptor{s}),
		connect.WithReadMaxBytes(rpcMaxMessage),
		connect.WithCompressMinBytes(RPCCompressMinBytes),
		connect.WithRecover(s.rpcRecover),
	}
	reflector := grpcreflect.NewStaticReflector(idgenv1connect.IDServiceName, grpchealth.HealthV1ServiceName)
	// One map lookup by the exact procedure, where an http.ServeMux would
	// match patterns on the hot path.
	byProcedure := map[string]http.Handler{}
	mount := func(prefix string, h http.Handler) {
		for _, p := range rpcProcedures[prefix] {
			byProcedure[p] = h
		}
	}
	mount(idgenv1connect.NewIDServiceHandler(rpcService{s}, opts...))
	mount(grpchealth.NewHandler(rpcHealth{s}, opts...))
	mount(grpcreflect.NewHandlerV1(reflector, opts...))
	mount(grpcreflect.NewHandlerV1Alpha(reflector, opts...))
	certErr := connect.NewErrorWriter(opts...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.RequireClientCert && !probePath(r.URL.Path) && !hasClientCert(r) {
			start := time.Now()
			_ = certErr.Write(w, r, s.rpcError(r.Context(), r.URL.Path, r.Header, errClientCert)) // the client went away
			procedure := r.URL.Path
			if _, ok := byProcedure[procedure]; !ok {
				procedure = "unmatched"
			}
			s.observeRPC(procedure, connect.CodeUnauthenticated, start)
			return
		}
		if h, ok := byProcedure[r.URL.Path]; ok {
			h.ServeHTTP(w, r)
			return
		}
		// An unknown service or method: gRPC clients read a 404 as
		// UNIMPLEMENTED.
		start := time.Now()
		http.NotFound(w, r)
		s.observeRPC("unmatched", connect.CodeUnimplemented, start)
	})
}

// rpcRecover answers a panic in a handler as INTERNAL, logged with its
// value, never with a stack trace in the answer.
func (s *Server) rpcRecover(ctx context.Context, spec connect.Spec, h http.Header, v any) error {
	if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
		panic(v)
	}
	return s.rpcError(ctx, spec.Procedure, h, fmt.Errorf("panic: %v", v))
}

// rpcService implements idgenv1connect.IDServiceHandler over the
// server's generators, with the HTTP API's checks and limits.
type rpcService struct{ s *Server }

var _ idgenv1connect.IDServiceHandler = rpcService{}

// Next serves IDs as GET /id/{tag}, /segment/{tag} and /snowflake/{tag}
// do.
func (r rpcService) Next(ctx context.Context, req *connect.Request[idgenv1.NextRequest]) (*connect.Response[idgenv1.NextResponse], error) {
	s, m := r.s, req.Msg
	tag := m.GetTag()
	if err := s.authorizeTag(req.Header(), tag); err != nil {
		return nil, err
	}
	var mode string
	switch m.GetMode() {
	case idgenv1.Mode_MODE_UNSPECIFIED:
		mode = s.cfg.Mode
	case idgenv1.Mode_MODE_SEGMENT:
		mode = ModeSegment
	case idgenv1.Mode_MODE_SNOWFLAKE:
		mode = ModeSnowflake
	default:
		return nil, errInvalidMode
	}
	g := s.gens[mode]
	if g == nil {
		return nil, errModeDisabled
	}
	format := formatNumeric
	switch m.GetFormat() {
	case idgenv1.Format_FORMAT_UNSPECIFIED, idgenv1.Format_FORMAT_NUMERIC:
	case idgenv1.Format_FORMAT_PREFIXED:
		format = formatPrefixed
	default:
		return nil, &apiError{http.StatusBadRequest, "invalid_format", "format must be FORMAT_NUMERIC (the default) or FORMAT_PREFIXED"}
	}
	n := m.GetCount()
	if n < 0 || int64(n) > int64(s.cfg.MaxBatch) {
		return nil, &apiError{http.StatusBadRequest, "invalid_count",
			"count must be 0 (one ID) or a whole number from 1 to " + strconv.Itoa(s.cfg.MaxBatch)}
	}
	if keys := req.Header()[idempotencyKeyHeader]; keys != nil {
		return s.keyedRPC(ctx, req.Header(), keys, g, keyedRequest{mode: mode, tag: tag, format: format, single: n == 0, n: int(n), rpc: true})
	}
	var ids []int64
	if n == 0 {
		id, err := g.Next(ctx, tag)
		if err != nil {
			return nil, err
		}
		ids = []int64{id}
	} else {
		var err error
		if ids, err = g.NextN(ctx, tag, int(n)); err != nil {
			return nil, err
		}
	}
	s.issued(tag, mode, len(ids))
	out, err := nextResponse(tag, format, ids)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// nextResponse is the answer to Next for ids.
func nextResponse(tag, format string, ids []int64) (*idgenv1.NextResponse, error) {
	out := &idgenv1.NextResponse{Tag: tag, Ids: ids}
	if format == formatPrefixed {
		out.PrefixedIds = make([]string, len(ids))
		for i, id := range ids {
			v, err := readable.Encode(tag, id)
			if err != nil {
				return nil, err
			}
			out.PrefixedIds[i] = v
		}
	}
	return out, nil
}

// rpcAnswerType is the content type of a recorded gRPC answer: a
// NextResponse in the protobuf wire format.
const rpcAnswerType = "application/proto; idgen.v1.NextResponse"

// keyedRPC answers a Next call with Idempotency-Key metadata as keyed
// does over HTTP, but records the NextResponse message itself, so that a
// repeat over any of the protocols connect serves (gRPC, gRPC-Web,
// Connect) gets the same message, with Idempotent-Replayed: true in its
// response metadata.
func (s *Server) keyedRPC(ctx context.Context, h http.Header, keys []string, g idgen.Generator, r keyedRequest) (*connect.Response[idgenv1.NextResponse], error) {
	var out *idgenv1.NextResponse
	ans, replayed, err := s.runKeyed(ctx, h, keys, g, r, func(ids []int64) (idempotency.Answer, error) {
		var err error
		if out, err = nextResponse(r.tag, r.format, ids); err != nil {
			return idempotency.Answer{}, err
		}
		b, err := proto.Marshal(out)
		return idempotency.Answer{Status: http.StatusOK, ContentType: rpcAnswerType, Body: b}, err
	})
	if err != nil {
		return nil, err
	}
	if !replayed {
		return connect.NewResponse(out), nil
	}
	// The fingerprint names gRPC, so the row holds a message this server
	// (or one of its versions) recorded; anything else is a corrupt row.
	out = new(idgenv1.NextResponse)
	if ans.ContentType != rpcAnswerType {
		return nil, fmt.Errorf("idempotency: a gRPC key's recorded answer is %q", ans.ContentType)
	}
	if err := proto.Unmarshal(ans.Body, out); err != nil {
		return nil, fmt.Errorf("idempotency: a gRPC key's recorded answer: %w", err)
	}
	resp := connect.NewResponse(out)
	resp.Header()[idempotency.ReplayedHeader] = []string{"true"}
	return resp, nil
}

// ReserveRange serves a range as POST /segment/{tag}/range does.
func (r rpcService) ReserveRange(ctx context.Context, req *connect.Request[idgenv1.ReserveRangeRequest]) (*connect.Response[idgenv1.ReserveRangeResponse], error) {
	s, m := r.s, req.Msg
	tag := m.GetTag()
	if err := s.authorizeTag(req.Header(), tag); err != nil {
		return nil, err
	}
	if s.cfg.Ranges == nil {
		return nil, errModeDisabled
	}
	if m.GetSize() < 1 {
		return nil, s.errInvalidSize()
	}
	// Clamped as over HTTP (rangez.go), so a caching client learns the cap.
	rg, err := s.cfg.Ranges.ReserveRange(ctx, tag, min(m.GetSize(), s.cfg.MaxRange))
	if err != nil {
		return nil, err
	}
	s.issued(tag, "range", int(rg.Size()))
	out := &idgenv1.ReserveRangeResponse{Tag: tag, Start: rg.Start, End: rg.End}
	if s.releaser != nil {
		out.ReleaseToken = s.book.issue(tag, rg)
	}
	return connect.NewResponse(out), nil
}

// ReleaseRange takes back the unused end of a range as POST
// /segment/{tag}/range/release does.
func (r rpcService) ReleaseRange(ctx context.Context, req *connect.Request[idgenv1.ReleaseRangeRequest]) (*connect.Response[idgenv1.ReleaseRangeResponse], error) {
	s, m := r.s, req.Msg
	tag := m.GetTag()
	if err := s.authorizeTag(req.Header(), tag); err != nil {
		return nil, err
	}
	if m.GetReleaseToken() == "" {
		return nil, errInvalidRelease
	}
	rg, err := s.release(ctx, tag, m.GetReleaseToken(), m.GetFrom())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&idgenv1.ReleaseRangeResponse{Tag: tag, From: m.GetFrom(), End: rg.end}), nil
}

// DecodeSnowflake splits an ID as GET /snowflake/decode/{id} does.
func (r rpcService) DecodeSnowflake(_ context.Context, req *connect.Request[idgenv1.DecodeSnowflakeRequest]) (*connect.Response[idgenv1.DecodeSnowflakeResponse], error) {
	id := req.Msg.GetId()
	if id < 0 {
		return nil, errInvalidSnowflake
	}
	p, err := r.s.cfg.Layout.Decode(id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&idgenv1.DecodeSnowflakeResponse{Id: id, Time: timestamppb.New(p.Time),
		UnixMs: p.Time.UnixMilli(), WorkerId: p.WorkerID, Sequence: p.Sequence}), nil
}

// DecodeReadable decodes a prefixed ID as GET /id/decode/{value} does.
func (r rpcService) DecodeReadable(_ context.Context, req *connect.Request[idgenv1.DecodeReadableRequest]) (*connect.Response[idgenv1.DecodeReadableResponse], error) {
	tag, id, err := readable.Decode(req.Msg.GetValue())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&idgenv1.DecodeReadableResponse{Tag: tag, Id: id}), nil
}

// authorizeTag admits a call for tag as requireTag does over HTTP
// (admitTag): the token travels as authorization metadata,
// "Bearer <token>".
func (s *Server) authorizeTag(h http.Header, tag string) error {
	tok, ok := parseBearer(h.Get("Authorization"))
	return s.admitTag(tok, ok, tag)
}

// rpcCode is the gRPC status of an answer: by its HTTP status, except
// where gRPC has a code that says more.
func rpcCode(ae *apiError) connect.Code {
	switch ae.code {
	case "mode_disabled", "idempotency_disabled", "release_disabled":
		// Not enabled on this server, as gRPC defines UNIMPLEMENTED: a
		// client can tell it from a mistake of its own without the detail.
		return connect.CodeUnimplemented
	case "tag_limit_reached", "idempotency_key_limit_reached":
		return connect.CodeResourceExhausted
	case "tag_exhausted", "time_exhausted", "idempotency_key_reused", "opaque_tag_range", "range_not_released":
		// Asking again does not help: an operator must act (a new tag or
		// epoch), or the caller must send a new key or, for an opaque
		// tag, ask for IDs instead of a range. (HTTP's 409 would read as
		// ALREADY_EXISTS, which names a different mistake.)
		return connect.CodeFailedPrecondition
	case "idempotency_key_in_flight":
		// A concurrency conflict the caller retries after RetryInfo.
		return connect.CodeAborted
	}
	if c, ok := rpcCodes[ae.status]; ok {
		return c
	}
	return connect.CodeInternal
}

// rpcCodes are the gRPC codes of the HTTP statuses answers have; any
// other status is INTERNAL.
var rpcCodes = map[int]connect.Code{
	http.StatusBadRequest:         connect.CodeInvalidArgument,
	http.StatusUnauthorized:       connect.CodeUnauthenticated,
	http.StatusForbidden:          connect.CodePermissionDenied,
	http.StatusNotFound:           connect.CodeNotFound,
	http.StatusConflict:           connect.CodeAlreadyExists,
	http.StatusServiceUnavailable: connect.CodeUnavailable,
}

// rpcError turns a handler's error into its gRPC status, with the idgen
// code as ErrorInfo and, when retrying helps, a RetryInfo; a 5xx is logged
// under the request ID, which the caller gets in ErrorInfo's metadata and
// the X-Request-Id trailer. Errors connect made itself pass unchanged.
func (s *Server) rpcError(ctx context.Context, procedure string, h http.Header, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	ae, retry := classify(err)
	rid := rpcRequestID(h)
	s.recordError(ctx, rid, procedure, ae, err)
	ce = connect.NewError(rpcCode(ae), errors.New(ae.message))
	ce.Meta().Set(requestIDHeader, rid)
	if d, e := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: ae.code, Domain: ErrorDomain,
		Metadata: map[string]string{"request_id": rid}}); e == nil {
		ce.AddDetail(d)
	}
	if retry {
		if d, e := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryDelay(err))}); e == nil {
			ce.AddDetail(d)
		}
	}
	return ce
}

// rpcRequestID is the caller's X-Request-Id metadata when it is sane, or
// a new one.
func rpcRequestID(h http.Header) string {
	if v := h[requestIDKey]; len(v) > 0 && saneRequestID(v[0]) {
		return v[0]
	}
	return newRequestID()
}

// rpcInterceptor maps errors, echoes the request ID, counts every call in
// idgen_grpc_request_duration_seconds and writes the access log.
type rpcInterceptor struct{ s *Server }

func (i rpcInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		resp, err := next(ctx, req)
		procedure := req.Spec().Procedure
		err = i.s.rpcError(ctx, procedure, req.Header(), err)
		if err == nil {
			// Echo only a request ID the caller sent: making one for
			// every success would cost the hot path for nobody.
			if v := req.Header()[requestIDKey]; len(v) > 0 && saneRequestID(v[0]) {
				resp.Header()[requestIDKey] = v[:1]
			}
		}
		i.s.endRPC(ctx, procedure, req.Peer(), req.Header(), err, start)
		return resp, err
	}
}

func (i rpcInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i rpcInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		procedure := conn.Spec().Procedure
		err := i.s.rpcError(ctx, procedure, conn.RequestHeader(), next(ctx, conn))
		i.s.endRPC(ctx, procedure, conn.Peer(), conn.RequestHeader(), err, start)
		return err
	}
}

// endRPC records a finished call in the metrics and the access log.
// Successful health checks are not logged, as /readyz is not: probes
// every few seconds would drown the rest.
func (s *Server) endRPC(ctx context.Context, procedure string, peer connect.Peer, h http.Header, err error, start time.Time) {
	code := rpcStatus(err)
	s.observeRPC(procedure, code, start)
	if !s.cfg.AccessLog || (code == 0 && strings.HasPrefix(procedure, "/grpc.health.v1.")) {
		return
	}
	level := slog.LevelInfo
	switch code {
	case connect.CodeUnavailable, connect.CodeInternal, connect.CodeUnknown, connect.CodeFailedPrecondition, connect.CodeDataLoss:
		level = slog.LevelWarn
	}
	rid := ""
	var ce *connect.Error
	if errors.As(err, &ce) {
		rid = ce.Meta().Get(requestIDHeader)
	}
	if rid == "" {
		rid = rpcRequestID(h)
	}
	s.cfg.Logger.LogAttrs(ctx, level, "rpc",
		slog.String("request_id", rid),
		slog.String("procedure", procedure),
		slog.String("protocol", peer.Protocol),
		slog.String("code", rpcCodeLabel(code)),
		slog.Duration("duration", time.Since(start)),
		slog.String("remote", peer.Addr),
	)
}

// rpcStatus is err's gRPC code, 0 for success.
func rpcStatus(err error) connect.Code {
	if err == nil {
		return 0
	}
	return connect.CodeOf(err)
}

// rpcCodeLabel names a code as gRPC does in lower case: "ok",
// "invalid_argument", "unavailable"…
func rpcCodeLabel(c connect.Code) string {
	if c == 0 {
		return "ok"
	}
	return c.String()
}

// observeRPC records one call in the histogram. Its labels are bounded:
// the procedure is one of rpcProcedures or "unmatched", the code one of
// gRPC's 17.
func (s *Server) observeRPC(procedure string, code connect.Code, start time.Time) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.rpcObserver(procedure, code).Observe(time.Since(start).Seconds())
	}
}

// rpcHealth is grpc.health.v1 for the whole server ("") and for
// idgen.v1.IDService: SERVING exactly when /readyz answers 200.
type rpcHealth struct{ s *Server }

// healthWatchInterval is how often Watch looks at readiness again.
const healthWatchInterval = time.Second

func (h rpcHealth) known(service string) error {
	if service != "" && service != idgenv1connect.IDServiceName {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("no service %q here: ask for \"\" or %q", service, idgenv1connect.IDServiceName))
	}
	return nil
}

func (h rpcHealth) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if err := h.known(req.Service); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := h.s.cfg.Ready(ctx); err != nil {
		h.s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "not ready", slog.String("path", "/grpc.health.v1.Health/Check"),
			slog.String("code", errNotReady.code), slog.Any("err", err))
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// Watch makes grpchealth check again every healthWatchInterval; it sends
// only changes.
func (h rpcHealth) Watch(_ context.Context, req *grpchealth.CheckRequest, onChange func()) (func(), error) {
	if err := h.known(req.Service); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(healthWatchInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				onChange()
			}
		}
	}()
	return func() { close(done) }, nil
}
