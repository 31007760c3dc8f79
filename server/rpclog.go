package server

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// endRPC records a finished call of either transport in the metrics and
// the access log; rid is the request ID an error was answered with.
// Successful health checks are not logged, as /readyz is not: probes
// every few seconds would drown the rest.
func (s *Server) endRPC(ctx context.Context, procedure, protocol, remote string, h http.Header, code connect.Code, rid string, start time.Time) {
	procedure = servedProcedure(procedure)
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

// servedProcedure is procedure if this server serves it, else
// "unmatched": any caller can name any method, and a made-up name must
// not become a series of its own, or a line of the access log that reads
// as a call of this API. grpc-go runs its interceptors, and so endRPC,
// for calls of unknown methods too.
func servedProcedure(procedure string) string {
	if i := strings.LastIndexByte(procedure, '/'); i > 0 && slices.Contains(rpcProcedures[procedure[:i+1]], procedure) {
		return procedure
	}
	return "unmatched"
}
