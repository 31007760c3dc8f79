package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/idempotency/middleware"
)

// counter is a connect service whose Next hands out a new number per
// call, and sets a header worth replaying.
type counter struct {
	idgenv1connect.UnimplementedIDServiceHandler
	n atomic.Int64
}

func (c *counter) Next(_ context.Context, req *connect.Request[idgenv1.NextRequest]) (*connect.Response[idgenv1.NextResponse], error) {
	n := c.n.Add(1)
	resp := connect.NewResponse(&idgenv1.NextResponse{Tag: req.Msg.GetTag(), Ids: []int64{n}})
	resp.Header().Set("X-Thing", req.Msg.GetTag())
	return resp, nil
}

func TestMiddleware_Connect(t *testing.T) {
	k, err := idempotency.New(idempotency.NewMemory(), idempotency.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	m, err := middleware.New(k, middleware.Options{Headers: []string{"X-Thing"},
		ConnectScope: func(_ context.Context, h http.Header) (string, error) { return "user:" + h.Get("X-User"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	svc := &counter{}
	path, h := idgenv1connect.NewIDServiceHandler(svc, connect.WithInterceptors(
		m.Connect(middleware.Replays[idgenv1.NextResponse](idgenv1connect.IDServiceNextProcedure))))
	mux := http.NewServeMux()
	mux.Handle(path, h)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	c := idgenv1connect.NewIDServiceClient(ts.Client(), ts.URL)
	ctx := context.Background()
	call := func(tag, key string) (*connect.Response[idgenv1.NextResponse], error) {
		req := connect.NewRequest(&idgenv1.NextRequest{Tag: tag})
		req.Header().Set(idempotency.KeyHeader, key)
		req.Header().Set("X-User", "ann")
		return c.Next(ctx, req)
	}
	first, err := call("order", "k1")
	if err != nil || first.Header().Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("first: %v %v", first, err)
	}
	again, err := call("order", "k1")
	if err != nil || again.Msg.GetIds()[0] != first.Msg.GetIds()[0] || again.Header().Get(idempotency.ReplayedHeader) != "true" ||
		again.Header().Get("X-Thing") != "order" || svc.n.Load() != 1 {
		t.Fatalf("repeat: %v %v after %d calls; want the first's IDs replayed after 1", again, err, svc.n.Load())
	}
	// Another request under the key: FAILED_PRECONDITION, as idgen's
	// own Next answers it.
	if _, err := call("other", "k1"); connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "idempotency_key_reused") {
		t.Fatalf("reused key: %v; want FAILED_PRECONDITION idempotency_key_reused", err)
	}
	// A procedure not registered refuses a key rather than ignoring it.
	req := connect.NewRequest(&idgenv1.ReserveRangeRequest{Tag: "order", Size: 5})
	req.Header().Set(idempotency.KeyHeader, "k2")
	_, err = c.ReserveRange(ctx, req)
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), "idempotency_not_supported") {
		t.Fatalf("unregistered procedure with a key: %v; want INVALID_ARGUMENT idempotency_not_supported", err)
	}
	// No key: every call runs.
	if _, err := c.Next(ctx, connect.NewRequest(&idgenv1.NextRequest{Tag: "order"})); err != nil || svc.n.Load() != 2 {
		t.Fatalf("unkeyed: %v after %d calls; want 2", err, svc.n.Load())
	}
}
