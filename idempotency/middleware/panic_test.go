package middleware_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"github.com/gin-gonic/gin"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/idempotency/middleware"
)

// panicky is a connect service whose first Next panics.
type panicky struct {
	idgenv1connect.UnimplementedIDServiceHandler
	calls atomic.Int64
}

func (p *panicky) Next(context.Context, *connect.Request[idgenv1.NextRequest]) (*connect.Response[idgenv1.NextResponse], error) {
	n := p.calls.Add(1)
	if n == 1 {
		panic("boom")
	}
	return connect.NewResponse(&idgenv1.NextResponse{Ids: []int64{n}}), nil
}

// A handler that panics frees its key on every transport, so that the
// retry, at once, runs it again rather than waiting out the lock.
func TestMiddleware_PanicFreesTheKey(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	for _, tc := range []struct {
		name string
		// serve starts a server whose handler panics on its first call
		// and counts its calls in calls; call sends one keyed request
		// and returns whether it got an answer.
		serve func(t *testing.T, m *middleware.Middleware, calls *atomic.Int64) (call func(key string) bool)
	}{
		{"net/http", func(t *testing.T, m *middleware.Middleware, calls *atomic.Int64) func(string) bool {
			ts := httptest.NewUnstartedServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if calls.Add(1) == 1 {
					panic("boom")
				}
				w.WriteHeader(http.StatusCreated)
			})))
			ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the panic's stack
			ts.Start()
			t.Cleanup(ts.Close)
			return func(key string) bool {
				req, _ := http.NewRequest(http.MethodPost, ts.URL, nil)
				req.Header.Set(idempotency.KeyHeader, key)
				resp, err := ts.Client().Do(req)
				if err != nil { // the server hangs up on a panic
					return false
				}
				_ = resp.Body.Close()
				return resp.StatusCode == http.StatusCreated
			}
		}},
		{"gin", func(t *testing.T, m *middleware.Middleware, calls *atomic.Int64) func(string) bool {
			r := gin.New()
			r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, _ any) { c.AbortWithStatus(http.StatusInternalServerError) }))
			r.POST("/", m.Gin(), func(c *gin.Context) {
				if calls.Add(1) == 1 {
					panic("boom")
				}
				c.Status(http.StatusCreated)
			})
			ts := httptest.NewServer(r)
			t.Cleanup(ts.Close)
			return func(key string) bool { return post(t, ts.URL, key, "").status == http.StatusCreated }
		}},
		{"connect", func(t *testing.T, m *middleware.Middleware, calls *atomic.Int64) func(string) bool {
			svc := &panicky{}
			path, h := idgenv1connect.NewIDServiceHandler(svc,
				connect.WithRecover(func(context.Context, connect.Spec, http.Header, any) error {
					return connect.NewError(connect.CodeInternal, errors.New("panic"))
				}),
				connect.WithInterceptors(m.Connect(middleware.Replays[idgenv1.NextResponse](idgenv1connect.IDServiceNextProcedure))))
			mux := http.NewServeMux()
			mux.Handle(path, h)
			ts := httptest.NewServer(mux)
			t.Cleanup(ts.Close)
			c := idgenv1connect.NewIDServiceClient(ts.Client(), ts.URL)
			t.Cleanup(func() { calls.Store(svc.calls.Load()) })
			return func(key string) bool {
				req := connect.NewRequest(&idgenv1.NextRequest{Tag: "order"})
				req.Header().Set(idempotency.KeyHeader, key)
				_, err := c.Next(context.Background(), req)
				calls.Store(svc.calls.Load())
				return err == nil
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// InFlightWait -1: a key left locked answers 409 at once.
			k, err := idempotency.New(idempotency.NewMemory(), idempotency.Config{InFlightWait: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Close() })
			m, err := middleware.New(k, middleware.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var calls atomic.Int64
			call := tc.serve(t, m, &calls)
			if call("p-1") {
				t.Fatal("the panicking call answered")
			}
			if !call("p-1") || calls.Load() != 2 {
				t.Fatalf("the retry after a panic: %d calls; want it answered by a second call", calls.Load())
			}
			if !call("p-1") || calls.Load() != 2 {
				t.Fatalf("a repeat of the retry: %d calls; want its replay", calls.Load())
			}
		})
	}
}
