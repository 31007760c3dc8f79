package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/idempotency"
)

// The gRPC API on the main port: connect-go handlers beside gin, through
// the same http.Server, serving gRPC and gRPC-Web over HTTP/2 (cleartext
// or TLS) and HTTP/1.1, and the Connect protocol over either. Requests
// whose path is /package.Service/… come here (isRPCPath); all others go
// to gin. The handlers are thin: the calls themselves are rpcapi.go's.

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

// rpcProcedures are the procedures served, by service prefix: each has
// series of its own in idgen_grpc_request_duration_seconds, and any other
// path is counted as "unmatched".
var rpcProcedures = map[string][]string{
	"/" + idgenv1connect.IDServiceName + "/": {idgenv1connect.IDServiceNextProcedure, idgenv1connect.IDServiceReserveRangeProcedure,
		idgenv1connect.IDServiceDecodeSnowflakeProcedure, idgenv1connect.IDServiceDecodeReadableProcedure,
		idgenv1connect.IDServiceReleaseRangeProcedure},
	"/" + idgenv1connect.LockServiceName + "/": {idgenv1connect.LockServiceAcquireProcedure, idgenv1connect.LockServiceRenewProcedure,
		idgenv1connect.LockServiceReleaseProcedure, idgenv1connect.LockServiceDescribeProcedure, idgenv1connect.LockServiceHoldProcedure},
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
	reflector := grpcreflect.NewStaticReflector(idgenv1connect.IDServiceName, idgenv1connect.LockServiceName, healthService)
	// One map lookup by the exact procedure, where an http.ServeMux would
	// match patterns on the hot path.
	byProcedure := map[string]http.Handler{}
	mount := func(prefix string, h http.Handler) {
		for _, p := range rpcProcedures[prefix] {
			byProcedure[p] = h
		}
	}
	mount(idgenv1connect.NewIDServiceHandler(rpcService{s}, opts...))
	mount(idgenv1connect.NewLockServiceHandler(lockConnect{s}, opts...))
	mount(s.connectHealth(opts...))
	mount(grpcreflect.NewHandlerV1(reflector, opts...))
	mount(grpcreflect.NewHandlerV1Alpha(reflector, opts...))
	certErr := connect.NewErrorWriter(opts...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.RequireClientCert && !probePath(r.URL.Path) && !hasClientCert(r) {
			start := time.Now()
			_ = certErr.Write(w, r, s.rpcError(r.Context(), r.URL.Path, r.Header, errClientCert)) // the client went away
			s.observeRPC(servedProcedure(r.URL.Path), connect.CodeUnauthenticated, start)
			return
		}
		if h, ok := byProcedure[r.URL.Path]; ok {
			if r.URL.Path == idgenv1connect.LockServiceHoldProcedure {
				// A Hold stream lives as long as its holder works: the
				// server's write timeout, meant for one answer, would
				// cut it. The client ends it, or the lock's loss.
				_ = http.NewResponseController(w).SetWriteDeadline(time.Time{}) // not every writer has one (tests)
			}
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
	msg := "unknown method " + r.URL.Path + ": this server serves " + idgenv1connect.IDServiceName + ", " + idgenv1connect.LockServiceName + ", " + healthService + " and server reflection"
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

// ReleaseRange takes back the unused end of a range as POST
// /segment/{tag}/range/release does.
func (r rpcService) ReleaseRange(ctx context.Context, req *connect.Request[idgenv1.ReleaseRangeRequest]) (*connect.Response[idgenv1.ReleaseRangeResponse], error) {
	return wrap(r.s.rpcReleaseRange(ctx, req.Header(), req.Msg))
}

// DecodeSnowflake splits an ID as GET /snowflake/decode/{id} does.
func (r rpcService) DecodeSnowflake(_ context.Context, req *connect.Request[idgenv1.DecodeSnowflakeRequest]) (*connect.Response[idgenv1.DecodeSnowflakeResponse], error) {
	return wrap(r.s.rpcDecodeSnowflake(req.Msg))
}

// DecodeReadable decodes a prefixed ID as GET /id/decode/{value} does.
func (r rpcService) DecodeReadable(_ context.Context, req *connect.Request[idgenv1.DecodeReadableRequest]) (*connect.Response[idgenv1.DecodeReadableResponse], error) {
	return wrap(rpcDecodeReadable(req.Msg))
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
