package server_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

// Drain turns health to NOT_SERVING, tells an open Watch and ends it with
// OK, so that a graceful shutdown does not wait on it; List names both
// services; an unknown method is UNIMPLEMENTED as a gRPC status. Over
// both transports.
func TestGRPC_DrainEndsWatchListAndUnknown(t *testing.T) {
	eachTransport(t, testGRPC_DrainEndsWatchListAndUnknown)
}

func testGRPC_DrainEndsWatchListAndUnknown(t *testing.T, tr transport) {
	st := openStore(t)
	alloc := newAllocator(t, st, segment.Options{AutoCreate: true})
	s, err := server.New(server.Config{Segment: alloc})
	if err != nil {
		t.Fatal(err)
	}
	target := tr.serve(t, s)
	ctx := t.Context()

	list := connect.NewClient[healthpb.HealthListRequest, healthpb.HealthListResponse](h2c(), target+"/grpc.health.v1.Health/List", connect.WithGRPC())
	check := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](h2c(), target+"/grpc.health.v1.Health/Check", connect.WithGRPC())
	watch := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](h2c(), target+"/grpc.health.v1.Health/Watch", connect.WithGRPC())

	l, err := list.CallUnary(ctx, connect.NewRequest(&healthpb.HealthListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"", idgenv1connect.IDServiceName} {
		if got := l.Msg.GetStatuses()[svc].GetStatus(); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("List: %q is %v, want SERVING", svc, got)
		}
	}

	nope := connect.NewClient[emptypb.Empty, emptypb.Empty](h2c(), target+"/idgen.v1.IDService/Nope", connect.WithGRPC())
	if _, err := nope.CallUnary(ctx, connect.NewRequest(&emptypb.Empty{})); connect.CodeOf(err) != connect.CodeUnimplemented ||
		!containsAll(err.Error(), "unknown method", idgenv1connect.IDServiceName) {
		t.Fatalf("unknown method: %v, want unimplemented naming the services", err)
	}

	stream, err := watch.CallServerStream(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	if !stream.Receive() || stream.Msg().GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first Watch message: %v %v, want SERVING", stream.Msg(), stream.Err())
	}
	s.Drain()
	if !stream.Receive() || stream.Msg().GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after Drain: %v %v, want NOT_SERVING", stream.Msg(), stream.Err())
	}
	if stream.Receive() || stream.Err() != nil {
		t.Fatalf("Watch after NOT_SERVING: %v %v, want its end with OK", stream.Msg(), stream.Err())
	}
	c, err := check.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{Service: idgenv1connect.IDServiceName}))
	if err != nil || c.Msg.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Check after Drain: %v %v, want NOT_SERVING", c, err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
