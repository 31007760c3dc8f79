package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
)

// grpc.health.v1 for the whole server ("") and for idgen.v1.IDService:
// SERVING exactly when /readyz answers 200, and NOT_SERVING from Drain
// on. Check, Watch and List are written once here, over grpc-go's
// message types, and served by both transports (connectHealth below,
// grpcHealth in grpcnative.go).

// healthService is the name of the health service.
const healthService = "grpc.health.v1.Health"

// The health procedures.
const (
	healthCheck = "/" + healthService + "/Check"
	healthWatch = "/" + healthService + "/Watch"
	healthList  = "/" + healthService + "/List"
)

// healthWatchInterval is how often Watch looks at readiness again.
const healthWatchInterval = time.Second

// Drain marks the server as shutting down, before its listeners close:
// health answers NOT_SERVING, and every Watch stream is sent NOT_SERVING
// and then ended, so that load balancers that watch (grpc-go's health
// checking, Envoy) stop sending calls at once, and an open Watch does not
// hold the graceful shutdown for its whole timeout. Drain may be called
// more than once.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.drained) }) }

func (s *Server) draining() bool {
	select {
	case <-s.drained:
		return true
	default:
		return false
	}
}

// healthOf is the status of service: "" or idgen.v1.IDService; any other
// name is NOT_FOUND.
func (s *Server) healthOf(ctx context.Context, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	if service != "" && service != idgenv1connect.IDServiceName {
		return 0, connect.NewError(connect.CodeNotFound, fmt.Errorf("no service %q here: ask for \"\" or %q", service, idgenv1connect.IDServiceName))
	}
	if s.draining() {
		return healthpb.HealthCheckResponse_NOT_SERVING, nil
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := s.cfg.Ready(ctx); err != nil {
		s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "not ready", slog.String("path", healthCheck),
			slog.String("code", errNotReady.code), slog.Any("err", err))
		return healthpb.HealthCheckResponse_NOT_SERVING, nil
	}
	return healthpb.HealthCheckResponse_SERVING, nil
}

// watchHealth sends service's status, then each change, looking again
// every healthWatchInterval, until ctx ends or the server drains: then it
// sends NOT_SERVING (unless that was the last status sent) and returns
// nil, which ends the stream with OK.
func (s *Server) watchHealth(ctx context.Context, service string, send func(*healthpb.HealthCheckResponse) error) error {
	last, err := s.healthOf(ctx, service)
	if err != nil {
		return err
	}
	if err := send(&healthpb.HealthCheckResponse{Status: last}); err != nil {
		return err
	}
	t := time.NewTicker(healthWatchInterval)
	defer t.Stop()
	for {
		var now healthpb.HealthCheckResponse_ServingStatus
		select {
		case <-ctx.Done():
			return nil
		case <-s.drained:
			if last != healthpb.HealthCheckResponse_NOT_SERVING {
				return send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING})
			}
			return nil
		case <-t.C:
			if now, err = s.healthOf(ctx, service); err != nil {
				return err
			}
		}
		if now != last {
			last = now
			if err := send(&healthpb.HealthCheckResponse{Status: now}); err != nil {
				return err
			}
		}
	}
}

// listHealth is every service's status.
func (s *Server) listHealth(ctx context.Context) (*healthpb.HealthListResponse, error) {
	st, err := s.healthOf(ctx, "")
	if err != nil {
		return nil, err
	}
	return &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{
		"":                           {Status: st},
		idgenv1connect.IDServiceName: {Status: st},
	}}, nil
}

// connectHealth is the health service as connect-go handlers, under its
// prefix.
func (s *Server) connectHealth(opts ...connect.HandlerOption) (string, *connectHealthMux) {
	return "/" + healthService + "/", &connectHealthMux{
		check: connect.NewUnaryHandler(healthCheck, func(ctx context.Context, req *connect.Request[healthpb.HealthCheckRequest]) (*connect.Response[healthpb.HealthCheckResponse], error) {
			st, err := s.healthOf(ctx, req.Msg.GetService())
			if err != nil {
				return nil, err
			}
			return connect.NewResponse(&healthpb.HealthCheckResponse{Status: st}), nil
		}, opts...),
		watch: connect.NewServerStreamHandler(healthWatch, func(ctx context.Context, req *connect.Request[healthpb.HealthCheckRequest], stream *connect.ServerStream[healthpb.HealthCheckResponse]) error {
			return s.watchHealth(ctx, req.Msg.GetService(), stream.Send)
		}, opts...),
		list: connect.NewUnaryHandler(healthList, func(ctx context.Context, _ *connect.Request[healthpb.HealthListRequest]) (*connect.Response[healthpb.HealthListResponse], error) {
			return wrap(s.listHealth(ctx))
		}, opts...),
	}
}

// connectHealthMux routes the health procedures to their handlers.
type connectHealthMux struct{ check, watch, list http.Handler }

func (m *connectHealthMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case healthCheck:
		m.check.ServeHTTP(w, r)
	case healthWatch:
		m.watch.ServeHTTP(w, r)
	default:
		m.list.ServeHTTP(w, r)
	}
}
