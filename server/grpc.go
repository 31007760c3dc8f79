package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
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

// The gRPC API (api/idgen/v1/idgen.proto) is one implementation, the
// rpc* methods of Server below, which take a message and the call's
// metadata as an http.Header and return a message or an error, over two
// transports, each a thin adapter:
//
//   - connect-go handlers beside gin, on the same port and through the
//     same http.Server (this file): gRPC and gRPC-Web over HTTP/2
//     (cleartext or TLS) and HTTP/1.1, and the Connect protocol over
//     either. Requests whose path is /package.Service/… go to them
//     (isRPCPath); all others go to gin.
//   - grpc-go's own server and transport on a listener of its own
//     (grpcnative.go, idgen serve --grpc-addr), for gRPC clients: it
//     costs about a third of the CPU per call of gRPC through net/http's
//     HTTP/2 server (docs/grpc.md).
//
// Handlers return errors as the HTTP handlers do; each transport maps
// them through rpcFault, with classify, the mapping HTTP uses, into a gRPC
// status with the idgen code in a google.rpc.ErrorInfo, so every API
// answers a mistake the same way.

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
	"/grpc.health.v1.Health/":                    {healthCheck, healthWatch, healthList},
	"/grpc.reflection.v1.ServerReflection/":      {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"},
	"/grpc.reflection.v1alpha.ServerReflection/": {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"},
}

// issuesIDs reports whether procedure consumes IDs, so that no cache may
// keep its answer.
func issuesIDs(procedure string) bool {
	return procedure == idgenv1connect.IDServiceNextProcedure || procedure == idgenv1connect.IDServiceReserveRangeProcedure
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
	reflector := grpcreflect.NewStaticReflector(idgenv1connect.IDServiceName, healthService)
	// One map lookup by the exact procedure, where an http.ServeMux would
	// match patterns on the hot path.
	byProcedure := map[string]http.Handler{}
	mount := func(prefix string, h http.Handler) {
		for _, p := range rpcProcedures[prefix] {
			byProcedure[p] = h
		}
	}
	mount(idgenv1connect.NewIDServiceHandler(rpcService{s}, opts...))
	mount(s.connectHealth(opts...))
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
			if issuesIDs(r.URL.Path) {
				// As noStore does for the HTTP routes; set before the
				// handler runs, so that errors carry it too.
				w.Header().Set("Cache-Control", "no-store")
			}
			h.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		unimplemented(w, r)
		s.observeRPC("unmatched", connect.CodeUnimplemented, start)
	})
}

// unimplemented answers a call of an unknown service or method as grpc-go
// does: UNIMPLEMENTED as a gRPC status, in a trailers-only response, for
// gRPC and gRPC-Web; the Connect protocol's own form (404 and a JSON
// error) otherwise.
func unimplemented(w http.ResponseWriter, r *http.Request) {
	msg := "unknown method " + r.URL.Path + ": this server serves " + idgenv1connect.IDServiceName + ", " + healthService + " and server reflection"
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/grpc") {
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Grpc-Status", strconv.Itoa(int(connect.CodeUnimplemented)))
		w.Header().Set("Grpc-Message", url.PathEscape(msg))
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	b, _ := json.Marshal(map[string]string{"code": connect.CodeUnimplemented.String(), "message": msg})
	_, _ = w.Write(b)
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
	out, replayed, err := r.s.rpcNext(ctx, req.Header(), req.Msg)
	if err != nil {
		return nil, err
	}
	resp := connect.NewResponse(out)
	if replayed {
		resp.Header()[idempotency.ReplayedHeader] = []string{"true"}
	}
	return resp, nil
}

// rpcNext is Next over either transport; h is the call's metadata.
// replayed says the answer is one recorded for its idempotency key.
func (s *Server) rpcNext(ctx context.Context, h http.Header, m *idgenv1.NextRequest) (_ *idgenv1.NextResponse, replayed bool, _ error) {
	tag := m.GetTag()
	if err := s.authorizeTag(h, tag); err != nil {
		return nil, false, err
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
		return nil, false, errInvalidMode
	}
	g := s.gens[mode]
	if g == nil {
		return nil, false, errModeDisabled // before the checks of format and count, as over HTTP
	}
	format := formatNumeric
	switch m.GetFormat() {
	case idgenv1.Format_FORMAT_UNSPECIFIED, idgenv1.Format_FORMAT_NUMERIC:
	case idgenv1.Format_FORMAT_PREFIXED:
		format = formatPrefixed
	default:
		return nil, false, &apiError{http.StatusBadRequest, "invalid_format", "format must be FORMAT_NUMERIC (the default) or FORMAT_PREFIXED"}
	}
	n := m.GetCount()
	if n < 0 || int64(n) > int64(s.cfg.MaxBatch) {
		return nil, false, &apiError{http.StatusBadRequest, "invalid_count",
			"count must be 0 (one ID) or a whole number from 1 to " + strconv.Itoa(s.cfg.MaxBatch)}
	}
	if keys := h[idempotency.KeyHeader]; keys != nil {
		return s.keyedRPC(ctx, h, keys, g, keyedRequest{mode: mode, tag: tag, format: format, single: n == 0, n: int(n), rpc: true})
	}
	var one [1]int64
	ids, err := s.svc.issue(ctx, g, mode, tag, int(n), one[:0])
	if err != nil {
		return nil, false, err
	}
	out, err := nextResponse(tag, format, ids)
	return out, false, err
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
// Connect, and grpc-go's transport) gets the same message; replayed says
// the adapter sets Idempotent-Replayed: true in the response metadata.
func (s *Server) keyedRPC(ctx context.Context, h http.Header, keys []string, g idgen.Generator, r keyedRequest) (*idgenv1.NextResponse, bool, error) {
	var out *idgenv1.NextResponse
	ans, replayed, err := s.svc.runKeyed(ctx, h, keys, g, r, func(ids []int64) (idempotency.Answer, error) {
		var err error
		if out, err = nextResponse(r.tag, r.format, ids); err != nil {
			return idempotency.Answer{}, err
		}
		b, err := proto.Marshal(out)
		return idempotency.Answer{Status: http.StatusOK, ContentType: rpcAnswerType, Body: b}, err
	})
	if err != nil {
		return nil, false, err
	}
	if !replayed {
		return out, false, nil
	}
	// The fingerprint names gRPC, so the row holds a message this server
	// (or one of its versions) recorded; anything else is a corrupt row.
	out = new(idgenv1.NextResponse)
	if ans.ContentType != rpcAnswerType {
		return nil, false, fmt.Errorf("idempotency: a gRPC key's recorded answer is %q", ans.ContentType)
	}
	if err := proto.Unmarshal(ans.Body, out); err != nil {
		return nil, false, fmt.Errorf("idempotency: a gRPC key's recorded answer: %w", err)
	}
	return out, true, nil
}

// ReserveRange serves a range as POST /segment/{tag}/range does.
func (r rpcService) ReserveRange(ctx context.Context, req *connect.Request[idgenv1.ReserveRangeRequest]) (*connect.Response[idgenv1.ReserveRangeResponse], error) {
	return wrap(r.s.rpcReserveRange(ctx, req.Header(), req.Msg))
}

// wrap is a connect response of out, or err.
func wrap[T any](out *T, err error) (*connect.Response[T], error) {
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// rpcReserveRange is ReserveRange over either transport.
func (s *Server) rpcReserveRange(ctx context.Context, h http.Header, m *idgenv1.ReserveRangeRequest) (*idgenv1.ReserveRangeResponse, error) {
	if h[idempotency.KeyHeader] != nil {
		return nil, errIdemNotSupported
	}
	tag := m.GetTag()
	if err := s.authorizeTag(h, tag); err != nil {
		return nil, err
	}
	if s.cfg.Ranges == nil {
		return nil, errModeDisabled // before the check of size, as over HTTP
	}
	if m.GetSize() < 1 {
		return nil, s.errInvalidSize()
	}
	rg, err := s.svc.reserve(ctx, tag, m.GetSize())
	if err != nil {
		return nil, err
	}
	return &idgenv1.ReserveRangeResponse{Tag: tag, Start: rg.Start, End: rg.End, ReleaseToken: s.svc.releaseToken(tag, rg)}, nil
}

// ReleaseRange takes back the unused end of a range as POST
// /segment/{tag}/range/release does.
func (r rpcService) ReleaseRange(ctx context.Context, req *connect.Request[idgenv1.ReleaseRangeRequest]) (*connect.Response[idgenv1.ReleaseRangeResponse], error) {
	return wrap(r.s.rpcReleaseRange(ctx, req.Header(), req.Msg))
}

// rpcReleaseRange is ReleaseRange over either transport.
func (s *Server) rpcReleaseRange(ctx context.Context, h http.Header, m *idgenv1.ReleaseRangeRequest) (*idgenv1.ReleaseRangeResponse, error) {
	if h[idempotency.KeyHeader] != nil {
		return nil, errIdemNotSupported
	}
	tag := m.GetTag()
	if err := s.authorizeTag(h, tag); err != nil {
		return nil, err
	}
	if m.GetReleaseToken() == "" {
		return nil, errInvalidRelease
	}
	rg, err := s.svc.release(ctx, tag, m.GetReleaseToken(), m.GetFrom())
	if err != nil {
		return nil, err
	}
	return &idgenv1.ReleaseRangeResponse{Tag: tag, From: m.GetFrom(), End: rg.end}, nil
}

// DecodeSnowflake splits an ID as GET /snowflake/decode/{id} does.
func (r rpcService) DecodeSnowflake(_ context.Context, req *connect.Request[idgenv1.DecodeSnowflakeRequest]) (*connect.Response[idgenv1.DecodeSnowflakeResponse], error) {
	return wrap(r.s.rpcDecodeSnowflake(req.Msg))
}

// rpcDecodeSnowflake is DecodeSnowflake over either transport.
func (s *Server) rpcDecodeSnowflake(m *idgenv1.DecodeSnowflakeRequest) (*idgenv1.DecodeSnowflakeResponse, error) {
	id := m.GetId()
	if id < 0 {
		return nil, errInvalidSnowflake
	}
	p, err := s.cfg.Layout.Decode(id)
	if err != nil {
		return nil, err
	}
	return &idgenv1.DecodeSnowflakeResponse{Id: id, Time: timestamppb.New(p.Time),
		UnixMs: p.Time.UnixMilli(), WorkerId: p.WorkerID, Sequence: p.Sequence}, nil
}

// DecodeReadable decodes a prefixed ID as GET /id/decode/{value} does.
func (r rpcService) DecodeReadable(_ context.Context, req *connect.Request[idgenv1.DecodeReadableRequest]) (*connect.Response[idgenv1.DecodeReadableResponse], error) {
	return wrap(rpcDecodeReadable(req.Msg))
}

// rpcDecodeReadable is DecodeReadable over either transport.
func rpcDecodeReadable(m *idgenv1.DecodeReadableRequest) (*idgenv1.DecodeReadableResponse, error) {
	tag, id, err := readable.Decode(m.GetValue())
	if err != nil {
		return nil, err
	}
	return &idgenv1.DecodeReadableResponse{Tag: tag, Id: id}, nil
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
	case "tag_exhausted", "time_exhausted", "idempotency_key_reused", "opaque_tag_range", "range_not_released", "opaque_key_conflict":
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

// rpcFault is the gRPC status of a handler's error, whichever transport
// answers it: its code and message, the idgen code as ErrorInfo and, when
// retrying helps, a RetryInfo. A 5xx is logged under the request ID,
// which the caller gets in ErrorInfo's metadata and the X-Request-Id
// trailer.
type rpcFault struct {
	code      connect.Code
	message   string
	requestID string
	details   []proto.Message
}

func (s *Server) rpcFault(ctx context.Context, procedure string, h http.Header, err error) rpcFault {
	ae, retry := classify(err)
	rid := rpcRequestID(h)
	s.recordError(ctx, rid, procedure, ae, err)
	f := rpcFault{code: rpcCode(ae), message: ae.message, requestID: rid,
		details: []proto.Message{&errdetails.ErrorInfo{Reason: ae.code, Domain: ErrorDomain, Metadata: map[string]string{"request_id": rid}}}}
	if retry {
		f.details = append(f.details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retryDelay(err))})
	}
	return f
}

// rpcError is rpcFault as connect-go's error. Errors connect made itself
// pass unchanged.
func (s *Server) rpcError(ctx context.Context, procedure string, h http.Header, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	f := s.rpcFault(ctx, procedure, h, err)
	ce = connect.NewError(f.code, errors.New(f.message))
	ce.Meta().Set(requestIDHeader, f.requestID)
	for _, m := range f.details {
		if d, e := connect.NewErrorDetail(m); e == nil {
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
		i.s.endRPC(ctx, procedure, req.Peer().Protocol, req.Peer().Addr, req.Header(), rpcStatus(err), connectRequestID(err), start)
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
		i.s.endRPC(ctx, procedure, conn.Peer().Protocol, conn.Peer().Addr, conn.RequestHeader(), rpcStatus(err), connectRequestID(err), start)
		return err
	}
}

// connectRequestID is the request ID rpcError put in err, or "".
func connectRequestID(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Meta().Get(requestIDHeader)
	}
	return ""
}

// endRPC records a finished call of either transport in the metrics and
// the access log; rid is the request ID an error was answered with.
// Successful health checks are not logged, as /readyz is not: probes
// every few seconds would drown the rest.
func (s *Server) endRPC(ctx context.Context, procedure, protocol, remote string, h http.Header, code connect.Code, rid string, start time.Time) {
	s.observeRPC(procedure, code, start)
	if !s.cfg.AccessLog || (code == 0 && strings.HasPrefix(procedure, "/grpc.health.v1.")) {
		return
	}
	level := slog.LevelInfo
	switch code {
	case connect.CodeUnavailable, connect.CodeInternal, connect.CodeUnknown, connect.CodeFailedPrecondition, connect.CodeDataLoss:
		level = slog.LevelWarn
	}
	if rid == "" {
		rid = rpcRequestID(h)
	}
	s.cfg.Logger.LogAttrs(ctx, level, "rpc",
		slog.String("request_id", rid),
		slog.String("procedure", procedure),
		slog.String("protocol", protocol),
		slog.String("code", rpcCodeLabel(code)),
		slog.Duration("duration", time.Since(start)),
		slog.String("remote", remote),
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
