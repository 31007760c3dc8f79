package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/idempotency"
)

// The gRPC API on grpc-go's own server and transport, on a listener of
// its own (idgen serve --grpc-addr).
//
// Why a listener of its own, and not a split of the main port: what a
// connection carries cannot be told from its first bytes. A gRPC client
// and a Connect or gRPC-Web client over HTTP/2 both open with the same
// preface (cleartext) or the same ALPN "h2" (TLS); only the content type
// of a stream's HEADERS frame says which, so a split on the main port
// would have to decode HPACK before handing the connection over, and a
// connection that mixes both would be split wrongly. A port of its own
// costs nothing per call or per connection, is what gRPC deployments
// (Kubernetes Services with a named grpc port, meshes) expect, and keeps
// the main port exactly as it was. docs/grpc.md has the measurements.

// The keepalive and connection-age settings of the gRPC server
// (docs/grpc.md). A maximum connection age is what makes clients spread
// over pods added by a scale-up: a gRPC channel otherwise keeps its
// connections as long as they live. grpc-go adds ±10% jitter to the age,
// so that connections made together do not all close together.
const (
	// GRPCMaxConnectionAge is how long a connection serves new calls
	// before the server asks the client to reconnect (GOAWAY).
	GRPCMaxConnectionAge = 5 * time.Minute
	// GRPCMaxConnectionAgeGrace is how long calls in flight on such a
	// connection may still run.
	GRPCMaxConnectionAgeGrace = 30 * time.Second
	// GRPCMaxConnectionIdle closes a connection without calls, as
	// NewHTTPServer's IdleTimeout does.
	GRPCMaxConnectionIdle = 120 * time.Second
	// GRPCKeepaliveTime is how long a quiet connection waits before the
	// server pings it, and GRPCKeepaliveTimeout how long the ping may take
	// before the connection is closed as dead.
	GRPCKeepaliveTime    = 30 * time.Second
	GRPCKeepaliveTimeout = 10 * time.Second
	// grpcMinClientPing is the shortest interval between the pings of a
	// client; pinging more often gets the connection closed (ENHANCE_YOUR_CALM).
	grpcMinClientPing = 10 * time.Second
)

// NewGRPCServer returns a grpc-go server of the gRPC API: idgen.v1.IDService,
// grpc.health.v1 (Check, Watch, List) and server reflection (v1 and
// v1alpha), with the same auth, idempotency, errors, metrics, access log
// and message-size cap as the connect-go handlers on the main port. cfg,
// when not nil, serves TLS: idgen serve passes the main port's config,
// so a certificate reload and a client CA apply to both. Call Drain
// before GracefulStop, so that Watch streams end.
func (s *Server) NewGRPCServer(cfg *tls.Config) *grpc.Server {
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	g := grpcAdapter{s}
	gs := grpc.NewServer(
		grpc.Creds(creds),
		grpc.MaxRecvMsgSize(rpcMaxMessage),
		// The main port's HTTP/2 limits (NewHTTPServer): grpc-go's own
		// defaults are unlimited streams and 16 MiB header lists.
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.MaxHeaderListSize(maxHeaderListSize),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     GRPCMaxConnectionIdle,
			MaxConnectionAge:      GRPCMaxConnectionAge,
			MaxConnectionAgeGrace: GRPCMaxConnectionAgeGrace,
			Time:                  GRPCKeepaliveTime,
			Timeout:               GRPCKeepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: grpcMinClientPing, PermitWithoutStream: true}),
		// No unary interceptor: with one, grpc-go's generated handlers
		// make a closure and a UnaryServerInfo per call. The unary
		// methods run through unaryCall instead.
		grpc.ChainStreamInterceptor(g.stream),
		grpc.UnknownServiceHandler(g.unknown),
	)
	idgenv1.RegisterIDServiceServer(gs, grpcIDService{g: g})
	idgenv1.RegisterLockServiceServer(gs, grpcLockService{g: g})
	healthpb.RegisterHealthServer(gs, grpcHealth{g: g})
	reflection.Register(gs)
	return gs
}

// grpcAdapter is what every call on grpc-go passes through, unary calls
// by unaryCall and streams (health's Watch, reflection, unknown methods)
// by its stream interceptor: both check the client certificate, recover
// panics, map errors and record the call. A unary method registered
// without unaryCall would skip all of that.
type grpcAdapter struct{ s *Server }

// grpcMetadata are the metadata keys the API reads, with the header
// names the rpc* methods look them up by.
var grpcMetadata = [...]struct{ md, header string }{
	{"authorization", "Authorization"},
	{"idempotency-key", idempotency.KeyHeader},
	{"idempotency-ttl", http.CanonicalHeaderKey(idempotency.TTLHeader)},
	{"x-request-id", requestIDKey},
}

// grpcHeader is the call's metadata that the API reads, as an
// http.Header; nil, without allocating, when the call sent none of it.
func grpcHeader(ctx context.Context) http.Header {
	var h http.Header
	for _, k := range grpcMetadata {
		if v := metadata.ValueFromIncomingContext(ctx, k.md); v != nil {
			if h == nil {
				h = make(http.Header, len(grpcMetadata))
			}
			h[k.header] = v
		}
	}
	return h
}

// grpcError is rpcFault as a grpc-go status, with the request ID in the
// x-request-id trailer. Statuses grpc-go made itself (a message that
// does not decode, a cancelled call) pass unchanged.
func (g grpcAdapter) grpcError(ctx context.Context, procedure string, h http.Header, err error) (requestID string, _ error) {
	if err == nil {
		return "", nil
	}
	if _, ok := status.FromError(err); ok {
		return "", err
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		// The health service's NOT_FOUND, written for both transports.
		return "", status.Error(grpcCodeOf(ce.Code()), ce.Message())
	}
	f := g.s.rpcFault(ctx, procedure, h, err)
	st := status.New(f.code.grpc, f.message)
	details := make([]protoadapt.MessageV1, len(f.details))
	for i, m := range f.details {
		details[i] = protoadapt.MessageV1Of(m)
	}
	if withDetails, e := st.WithDetails(details...); e == nil {
		st = withDetails
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-request-id", f.requestID))
	return f.requestID, st.Err()
}

// finish maps err, echoes the caller's request ID on success, and
// records the call in the metrics and the access log.
func (g grpcAdapter) finish(ctx context.Context, procedure string, h http.Header, err error, start time.Time) error {
	rid, err := g.grpcError(ctx, procedure, h, err)
	if err == nil {
		if v := h[requestIDKey]; len(v) > 0 && saneRequestID(v[0]) {
			_ = grpc.SetHeader(ctx, metadata.Pairs("x-request-id", v[0]))
		}
	}
	// The peer's address is formatted for the access log only: it is a
	// string built on every call otherwise.
	remote := ""
	if g.s.cfg.AccessLog {
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			remote = p.Addr.String()
		}
	}
	g.s.endRPC(ctx, procedure, "grpc", remote, h, connectCodeOf(status.Code(err)), rid, start)
	return err
}

// recovered answers a panic in a handler as INTERNAL, logged with its
// value, never with a stack trace in the answer, as rpcRecover does.
func recovered(v any) error { return fmt.Errorf("panic: %v", v) }

// unaryCall runs fn as the unary call procedure, with the work of an
// interceptor inline: the client certificate check, a panic answered as
// INTERNAL, the error mapping, metrics and access log. fn gets the
// call's metadata, read once for it and the finish alike.
func unaryCall[Resp any](ctx context.Context, g grpcAdapter, procedure string, fn func(h http.Header) (*Resp, error)) (resp *Resp, err error) {
	start := time.Now()
	h := grpcHeader(ctx)
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, recovered(v)
		}
		if err = g.finish(ctx, procedure, h, err, start); err != nil {
			resp = nil
		}
	}()
	if err := g.clientCert(ctx, procedure); err != nil {
		return nil, err
	}
	return fn(h)
}

// clientCert is Config.RequireClientCert on grpc-go's transport, as
// rpcHandler and requireClientCert do on the main port: the handshake
// verifies a certificate if one is given, and every procedure but
// health's needs one.
func (g grpcAdapter) clientCert(ctx context.Context, procedure string) error {
	if !g.s.cfg.RequireClientCert || probePath(procedure) {
		return nil
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			return nil
		}
	}
	return errClientCert
}

func (g grpcAdapter) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			err = recovered(v)
		}
		err = g.finish(ss.Context(), info.FullMethod, grpcHeader(ss.Context()), err, start)
	}()
	if err := g.clientCert(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// unknown answers a call of a service or method not served as
// UNIMPLEMENTED. The stream interceptor records it, as "unmatched" (endRPC),
// as on the main port.
func (g grpcAdapter) unknown(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	return status.Errorf(codes.Unimplemented, "unknown method %s: this server serves %s, %s, %s and server reflection", method, idgenv1connect.IDServiceName, idgenv1connect.LockServiceName, healthService)
}

// grpcIDService is idgen.v1.IDService on grpc-go, registered with the
// generated descriptor (idgen_grpc.pb.go). Each method runs the RPC code
// both transports share (rpcapi.go) through unaryCall.
type grpcIDService struct {
	idgenv1.UnimplementedIDServiceServer
	g grpcAdapter
}

func (i grpcIDService) Next(ctx context.Context, m *idgenv1.NextRequest) (*idgenv1.NextResponse, error) {
	return unaryCall(ctx, i.g, idgenv1.IDService_Next_FullMethodName, func(h http.Header) (*idgenv1.NextResponse, error) {
		out, replayed, err := i.g.s.rpcNext(ctx, h, m)
		if replayed {
			_ = grpc.SetHeader(ctx, metadata.Pairs("idempotent-replayed", "true"))
		}
		return out, err
	})
}

func (i grpcIDService) ReserveRange(ctx context.Context, m *idgenv1.ReserveRangeRequest) (*idgenv1.ReserveRangeResponse, error) {
	return unaryCall(ctx, i.g, idgenv1.IDService_ReserveRange_FullMethodName, func(h http.Header) (*idgenv1.ReserveRangeResponse, error) {
		return i.g.s.rpcReserveRange(ctx, h, m)
	})
}

func (i grpcIDService) ReleaseRange(ctx context.Context, m *idgenv1.ReleaseRangeRequest) (*idgenv1.ReleaseRangeResponse, error) {
	return unaryCall(ctx, i.g, idgenv1.IDService_ReleaseRange_FullMethodName, func(h http.Header) (*idgenv1.ReleaseRangeResponse, error) {
		return i.g.s.rpcReleaseRange(ctx, h, m)
	})
}

func (i grpcIDService) DecodeSnowflake(ctx context.Context, m *idgenv1.DecodeSnowflakeRequest) (*idgenv1.DecodeSnowflakeResponse, error) {
	return unaryCall(ctx, i.g, idgenv1.IDService_DecodeSnowflake_FullMethodName, func(http.Header) (*idgenv1.DecodeSnowflakeResponse, error) {
		return i.g.s.rpcDecodeSnowflake(m)
	})
}

func (i grpcIDService) DecodeReadable(ctx context.Context, m *idgenv1.DecodeReadableRequest) (*idgenv1.DecodeReadableResponse, error) {
	return unaryCall(ctx, i.g, idgenv1.IDService_DecodeReadable_FullMethodName, func(http.Header) (*idgenv1.DecodeReadableResponse, error) {
		return rpcDecodeReadable(m)
	})
}

// grpcHealth is the health service for grpc-go (rpchealth.go).
type grpcHealth struct {
	healthpb.UnimplementedHealthServer
	g grpcAdapter
}

func (h grpcHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return unaryCall(ctx, h.g, healthCheck, func(http.Header) (*healthpb.HealthCheckResponse, error) {
		st, err := h.g.s.healthOf(ctx, req.GetService())
		if err != nil {
			return nil, err
		}
		return &healthpb.HealthCheckResponse{Status: st}, nil
	})
}

func (h grpcHealth) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	return h.g.s.watchHealth(stream.Context(), req.GetService(), stream.Send)
}

func (h grpcHealth) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	return unaryCall(ctx, h.g, healthList, func(http.Header) (*healthpb.HealthListResponse, error) {
		return h.g.s.listHealth(ctx)
	})
}
