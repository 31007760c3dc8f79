package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

// serveH2 serves h as idgen serve does, through server.NewHTTPServer on a
// loopback port (HTTP/1.1 and cleartext HTTP/2), and returns its base URL.
func serveH2(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewHTTPServer(ln.Addr().String(), h)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// h2c is an HTTP client that speaks cleartext HTTP/2 only, as gRPC
// clients do.
func h2c() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}, Timeout: 10 * time.Second}
}

// rpcServer is newServer's server, with ranges, for the gRPC API; it
// returns the base URL of its main port and a gRPC client of it over tr.
func rpcServer(t *testing.T, tr transport, cfg server.Config) (string, idgenv1connect.IDServiceClient) {
	base, target := rpcTargets(t, tr, cfg)
	return base, idgenv1connect.NewIDServiceClient(h2c(), target, connect.WithGRPC())
}

// rpcTargets is rpcServer's main port and the base URL of its gRPC API
// over tr.
func rpcTargets(t *testing.T, tr transport, cfg server.Config) (base, target string) {
	t.Helper()
	st := openStore(t)
	if err := st.CreateTag(t.Context(), segment.Tag{Name: "order", MaxID: 1001, Step: 100}); err != nil {
		t.Fatal(err)
	}
	alloc := newAllocator(t, st, segment.Options{AutoCreate: false})
	cfg.Segment, cfg.Ranges = alloc, alloc
	if cfg.Ready == nil {
		cfg.Ready = st.Ping
	}
	h, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base = serveH2(t, h)
	if target = base; tr.name != "connect-go" {
		target = tr.serve(t, h)
	}
	return base, target
}

// idgenCode is the reason of the idgen ErrorInfo of err, and whether it
// carries a RetryInfo.
func idgenCode(t *testing.T, err error) (code string, retry time.Duration, rid string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("not a connect error: %v", err)
	}
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			t.Fatal(err)
		}
		switch v := v.(type) {
		case *errdetails.ErrorInfo:
			if v.GetDomain() != server.ErrorDomain {
				t.Fatalf("ErrorInfo domain %q", v.GetDomain())
			}
			code, rid = v.GetReason(), v.GetMetadata()["request_id"]
		case *errdetails.RetryInfo:
			retry = v.GetRetryDelay().AsDuration()
		}
	}
	return code, retry, rid
}

func TestGRPC_Next(t *testing.T) { eachTransport(t, testGRPC_Next) }

func testGRPC_Next(t *testing.T, tr transport) {
	_, c := rpcServer(t, tr, server.Config{MaxBatch: 50, MaxRange: 500})
	ctx := t.Context()
	one, err := c.Next(ctx, connect.NewRequest(&idgenv1.NextRequest{Tag: "order"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := one.Msg.GetIds(); len(got) != 1 || got[0] != 1001 || one.Msg.GetTag() != "order" {
		t.Fatalf("first ID %v of %q, want [1001] of order", got, one.Msg.GetTag())
	}
	batch, err := c.Next(ctx, connect.NewRequest(&idgenv1.NextRequest{Tag: "order", Count: 50, Mode: idgenv1.Mode_MODE_SEGMENT,
		Format: idgenv1.Format_FORMAT_PREFIXED}))
	if err != nil {
		t.Fatal(err)
	}
	ids, pre := batch.Msg.GetIds(), batch.Msg.GetPrefixedIds()
	if len(ids) != 50 || ids[0] != 1002 || ids[49] != 1051 || !slices.IsSorted(ids) || len(pre) != 50 || !strings.HasPrefix(pre[0], "order_") {
		t.Fatalf("batch %v %v", ids, pre)
	}
	dec, err := c.DecodeReadable(ctx, connect.NewRequest(&idgenv1.DecodeReadableRequest{Value: pre[0]}))
	if err != nil || dec.Msg.GetTag() != "order" || dec.Msg.GetId() != 1002 {
		t.Fatalf("decode %s: %v %v", pre[0], dec, err)
	}
	// A range as asked, then one above MaxRange clamped to it, as over
	// HTTP, so that a caching client learns the cap.
	// (The tag's step, 100, is below both sizes.)
	last := ids[49]
	for _, tc := range []struct{ size, want int64 }{{300, 300}, {5000, 500}} {
		rg, err := c.ReserveRange(ctx, connect.NewRequest(&idgenv1.ReserveRangeRequest{Tag: "order", Size: tc.size}))
		if err != nil || rg.Msg.GetTag() != "order" || rg.Msg.GetEnd()-rg.Msg.GetStart() != tc.want || rg.Msg.GetStart() <= last {
			t.Fatalf("range of %d: %v %v, want %d IDs above %d", tc.size, rg, err, tc.want, last)
		}
		last = rg.Msg.GetEnd() - 1
	}
	sf, err := c.DecodeSnowflake(ctx, connect.NewRequest(&idgenv1.DecodeSnowflakeRequest{Id: 123456789012345}))
	if err != nil || sf.Msg.GetWorkerId() != 221 || sf.Msg.GetTime().AsTime().UnixMilli() != sf.Msg.GetUnixMs() {
		t.Fatalf("decode snowflake: %v %v", sf, err)
	}
}

// Every kind of bad input gets the same idgen code over gRPC as over HTTP,
// with the gRPC status that matches the HTTP one.
func TestGRPC_ErrorsMatchHTTP(t *testing.T) { eachTransport(t, testGRPC_ErrorsMatchHTTP) }

func testGRPC_ErrorsMatchHTTP(t *testing.T, tr transport) {
	base, c := rpcServer(t, tr, server.Config{MaxBatch: 50, MaxRange: 1000})
	ctx := t.Context()
	next := func(m *idgenv1.NextRequest) func() error {
		return func() error { _, err := c.Next(ctx, connect.NewRequest(m)); return err }
	}
	for _, tc := range []struct {
		name   string
		method string
		path   string // "" when HTTP has no such input
		call   func() error
		status int
		code   string
		rpc    connect.Code
	}{
		{"invalid tag", "GET", "/id/bad%20tag", next(&idgenv1.NextRequest{Tag: "bad tag"}), 400, "invalid_tag", connect.CodeInvalidArgument},
		{"empty tag", "", "", next(&idgenv1.NextRequest{}), 400, "invalid_tag", connect.CodeInvalidArgument},
		{"count too large", "GET", "/id/order?count=51", next(&idgenv1.NextRequest{Tag: "order", Count: 51}), 400, "invalid_count", connect.CodeInvalidArgument},
		{"count negative", "GET", "/id/order?count=-1", next(&idgenv1.NextRequest{Tag: "order", Count: -1}), 400, "invalid_count", connect.CodeInvalidArgument},
		{"unknown format", "GET", "/id/order?format=hex", next(&idgenv1.NextRequest{Tag: "order", Format: 7}), 400, "invalid_format", connect.CodeInvalidArgument},
		{"unknown mode", "", "", next(&idgenv1.NextRequest{Tag: "order", Mode: 7}), 400, "invalid_mode", connect.CodeInvalidArgument},
		{"unknown tag", "GET", "/segment/ghost", next(&idgenv1.NextRequest{Tag: "ghost", Mode: idgenv1.Mode_MODE_SEGMENT}), 404, "tag_not_found", connect.CodeNotFound},
		{"mode off", "GET", "/snowflake/order", next(&idgenv1.NextRequest{Tag: "order", Mode: idgenv1.Mode_MODE_SNOWFLAKE}), 404, "mode_disabled", connect.CodeUnimplemented},
		{"range size 0", "POST", "/segment/order/range?size=0", func() error {
			_, err := c.ReserveRange(ctx, connect.NewRequest(&idgenv1.ReserveRangeRequest{Tag: "order"}))
			return err
		}, 400, "invalid_size", connect.CodeInvalidArgument},
		// A size above MaxRange is clamped, not refused (TestGRPC_Next).
		{"range size negative", "POST", "/segment/order/range?size=-5", func() error {
			_, err := c.ReserveRange(ctx, connect.NewRequest(&idgenv1.ReserveRangeRequest{Tag: "order", Size: -5}))
			return err
		}, 400, "invalid_size", connect.CodeInvalidArgument},
		{"negative snowflake", "GET", "/snowflake/decode/-1", func() error {
			_, err := c.DecodeSnowflake(ctx, connect.NewRequest(&idgenv1.DecodeSnowflakeRequest{Id: -1}))
			return err
		}, 400, "invalid_id", connect.CodeInvalidArgument},
		{"bad checksum", "GET", "/id/decode/order_BukQL3y", func() error {
			_, err := c.DecodeReadable(ctx, connect.NewRequest(&idgenv1.DecodeReadableRequest{Value: "order_BukQL3y"}))
			return err
		}, 400, "invalid_id", connect.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.path != "" {
				a := do(t, tc.method, base+tc.path, "", "")
				if a.status != tc.status || errCode(t, a.body) != tc.code {
					t.Fatalf("HTTP %s %s: %d %s, want %d %s", tc.method, tc.path, a.status, a.body, tc.status, tc.code)
				}
			}
			err := tc.call()
			code, retry, _ := idgenCode(t, err)
			if connect.CodeOf(err) != tc.rpc || code != tc.code || retry != 0 {
				t.Fatalf("gRPC: %v (reason %q, retry %v), want %v %s", err, code, retry, tc.rpc, tc.code)
			}
			if msg := connect.NewError(0, err).Message(); msg == "" || strings.Contains(msg, "goroutine") {
				t.Fatalf("message %q", msg)
			}
		})
	}
}

// A store that cannot be reached is UNAVAILABLE with a RetryInfo, its
// cause in the log under the request ID the caller gets, never in the
// answer; a panic is INTERNAL without its value.
func TestGRPC_UnavailableAndPanics(t *testing.T) { eachTransport(t, testGRPC_UnavailableAndPanics) }

func testGRPC_UnavailableAndPanics(t *testing.T, tr transport) {
	for _, tc := range []struct {
		name  string
		gen   server.Config
		rpc   connect.Code
		code  string
		retry time.Duration
	}{
		{"store down", server.Config{Segment: failing{}}, connect.CodeUnavailable, "unavailable", time.Second},
		{"panic", server.Config{Segment: panicking{}}, connect.CodeInternal, "internal", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			cfg := tc.gen
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			h, err := server.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := tr.client(t, h)
			_, err = c.Next(t.Context(), connect.NewRequest(&idgenv1.NextRequest{Tag: "order"}))
			code, retry, rid := idgenCode(t, err)
			if connect.CodeOf(err) != tc.rpc || code != tc.code || retry != tc.retry || rid == "" {
				t.Fatalf("%v: reason %q retry %v request ID %q; want %v %s %v", err, code, retry, rid, tc.rpc, tc.code, tc.retry)
			}
			if msg := err.Error(); strings.Contains(msg, "refused") || strings.Contains(msg, "boom") {
				t.Fatalf("answer leaks the cause: %s", msg)
			}
			if l := logs.String(); !strings.Contains(l, rid) || (!strings.Contains(l, "refused") && !strings.Contains(l, "boom")) {
				t.Fatalf("log lacks the cause under %s:\n%s", rid, l)
			}
		})
	}
}

// API tokens scope gRPC calls per tag exactly as they scope HTTP calls.
func TestGRPC_TokensScopeTags(t *testing.T) { eachTransport(t, testGRPC_TokensScopeTags) }

func testGRPC_TokensScopeTags(t *testing.T, tr transport) {
	const (
		admin = "grpc-admin-token-0123456789"
		order = "grpc-order-token-0123456789"
		other = "grpc-other-token-0123456789"
	)
	base, c := rpcServer(t, tr, server.Config{AdminToken: admin, APITokens: server.APITokens{order: {"order"}, other: {"other"}}})
	ctx := t.Context()
	for _, tc := range []struct {
		name, token string
		status      int
		code        string
		rpc         connect.Code
	}{
		{"no token", "", 401, "unauthorized", connect.CodeUnauthenticated},
		{"token of another tag", other, 403, "forbidden", connect.CodePermissionDenied},
		{"unknown token", "grpc-nobody-token-0123456789", 403, "forbidden", connect.CodePermissionDenied},
		{"admin token", admin, 403, "forbidden", connect.CodePermissionDenied},
		{"token of the tag", order, 200, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, "GET", base+"/id/order", tc.token, "")
			if a.status != tc.status || (tc.code != "" && errCode(t, a.body) != tc.code) {
				t.Fatalf("HTTP: %d %s, want %d %s", a.status, a.body, tc.status, tc.code)
			}
			for _, call := range []func(*connect.Request[idgenv1.NextRequest]) error{
				func(r *connect.Request[idgenv1.NextRequest]) error { _, err := c.Next(ctx, r); return err },
				func(r *connect.Request[idgenv1.NextRequest]) error {
					rr := connect.NewRequest(&idgenv1.ReserveRangeRequest{Tag: r.Msg.GetTag(), Size: 10})
					for k, v := range r.Header() {
						rr.Header()[k] = v
					}
					_, err := c.ReserveRange(ctx, rr)
					return err
				},
			} {
				req := connect.NewRequest(&idgenv1.NextRequest{Tag: "order"})
				if tc.token != "" {
					req.Header().Set("Authorization", "Bearer "+tc.token)
				}
				err := call(req)
				if tc.rpc == 0 {
					if err != nil {
						t.Fatalf("gRPC: %v", err)
					}
					continue
				}
				if code, _, _ := idgenCode(t, err); connect.CodeOf(err) != tc.rpc || code != tc.code {
					t.Fatalf("gRPC: %v (reason %q), want %v %s", err, code, tc.rpc, tc.code)
				}
			}
		})
	}
}

// grpc.health.v1 follows the readiness check, as /readyz does; reflection
// lists the services; Connect's JSON works over HTTP/1.1; the metrics
// count calls by procedure and code.
func TestGRPC_HealthReflectionConnectAndMetrics(t *testing.T) {
	eachTransport(t, testGRPC_HealthReflectionConnectAndMetrics)
}

func testGRPC_HealthReflectionConnectAndMetrics(t *testing.T, tr transport) {
	var down error
	m := server.NewMetrics()
	base, target := rpcTargets(t, tr, server.Config{Metrics: m, Ready: func(context.Context) error { return down }})
	c := idgenv1connect.NewIDServiceClient(h2c(), target, connect.WithGRPC())
	ctx := t.Context()
	hc := grpchealth.NewClient(h2c(), target, connect.WithGRPC())
	for _, tc := range []struct {
		down error
		want grpchealth.Status
	}{{nil, grpchealth.StatusServing}, {errors.New("store down"), grpchealth.StatusNotServing}, {nil, grpchealth.StatusServing}} {
		down = tc.down
		for _, svc := range []string{"", idgenv1connect.IDServiceName} {
			got, err := hc.Check(ctx, &grpchealth.CheckRequest{Service: svc})
			if err != nil || got.Status != tc.want {
				t.Fatalf("health of %q with ready error %v: %v %v, want %v", svc, tc.down, got, err, tc.want)
			}
		}
	}
	if _, err := hc.Check(ctx, &grpchealth.CheckRequest{Service: "nope.v1.Nope"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("health of an unknown service: %v, want not_found", err)
	}

	stream := grpcreflect.NewClient(h2c(), target, connect.WithGRPC()).NewStream(ctx)
	names, err := stream.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = stream.Close()
	if !slices.Contains(names, idgenv1connect.IDServiceName) || !slices.Contains(names, grpchealth.HealthV1ServiceName) {
		t.Fatalf("reflection lists %v", names)
	}

	// The Connect protocol's JSON over HTTP/1.1, as curl sends it.
	req, _ := http.NewRequestWithContext(ctx, "POST", base+idgenv1connect.IDServiceNextProcedure, strings.NewReader(`{"tag":"order","count":2}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var got struct {
		Tag string
		IDs []string
	}
	// IDs are JSON strings, as over HTTP: 64-bit values survive JavaScript.
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 200 || resp.ProtoMajor != 1 ||
		got.Tag != "order" || !slices.Equal(got.IDs, []string{"1001", "1002"}) {
		t.Fatalf("Connect JSON over %s: %d %s", resp.Proto, resp.StatusCode, body)
	}

	// gRPC-Web over HTTP/1.1, as a browser sends it.
	web := idgenv1connect.NewIDServiceClient(&http.Client{Timeout: 10 * time.Second}, base, connect.WithGRPCWeb())
	if resp, err := web.Next(ctx, connect.NewRequest(&idgenv1.NextRequest{Tag: "order"})); err != nil || len(resp.Msg.GetIds()) != 1 {
		t.Fatalf("gRPC-Web over HTTP/1.1: %v %v", resp, err)
	}

	if _, err := c.Next(ctx, connect.NewRequest(&idgenv1.NextRequest{Tag: "bad tag"})); err == nil {
		t.Fatal("bad tag accepted")
	}
	a := do(t, "GET", base+"/idgen.v1.IDService/Nope", "", "")
	if a.status != 404 {
		t.Fatalf("unknown procedure: %d", a.status)
	}
	metrics := do(t, "GET", base+"/metrics", "", "").body
	for _, want := range []string{
		`idgen_grpc_request_duration_seconds_count{code="ok",procedure="/idgen.v1.IDService/Next"} 2`,
		`idgen_grpc_request_duration_seconds_count{code="invalid_argument",procedure="/idgen.v1.IDService/Next"} 1`,
		`idgen_grpc_request_duration_seconds_count{code="ok",procedure="/grpc.health.v1.Health/Check"} 6`,
		`idgen_grpc_request_duration_seconds_count{code="not_found",procedure="/grpc.health.v1.Health/Check"} 1`,
		`idgen_grpc_request_duration_seconds_count{code="unimplemented",procedure="unmatched"} 1`,
		`idgen_client_errors_total{code="invalid_tag"} 1`,
		`idgen_ids_issued_total{mode="segment",tag="order"} 3`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Made-up tags and procedures, which any caller can send, add no series:
// the gRPC histogram is labelled by registered procedure and code only.
func TestGRPC_MetricsStayBounded(t *testing.T) {
	t.Parallel()
	m := server.NewMetrics()
	base, c := rpcServer(t, transports()[0], server.Config{Metrics: m})
	ctx := t.Context()
	series := func() int {
		n := 0
		for line := range strings.Lines(do(t, "GET", base+"/metrics", "", "").body) {
			if strings.HasPrefix(line, "idgen_") {
				n++
			}
		}
		return n
	}
	// One of each kind first, so that their series exist.
	flood := func(i int) {
		_, _ = c.Next(ctx, connect.NewRequest(&idgenv1.NextRequest{Tag: fmt.Sprintf("ghost-%d", i), Mode: idgenv1.Mode_MODE_SEGMENT}))
		_, _ = c.Next(ctx, connect.NewRequest(&idgenv1.NextRequest{Tag: fmt.Sprintf("bad tag %d", i)}))
		do(t, "POST", fmt.Sprintf("%s/idgen.v1.IDService/Made%d", base, i), "", "")
		do(t, "POST", fmt.Sprintf("%s/made%d.v1.S/M", base, i), "", "")
	}
	flood(0)
	series() // the scrape's own series
	before := series()
	// Unbounded series would grow by one per flood at least: -short's 50
	// floods show it as the whole run's 300 do.
	floods := 300
	if testing.Short() {
		floods = 50
	}
	for i := 1; i <= floods; i++ {
		flood(i)
	}
	if after := series(); after != before {
		t.Fatalf("%d idgen_ series before the flood, %d after:\n%s", before, after, do(t, "GET", base+"/metrics", "", "").body)
	}
}

// The refusals of a tag that cannot take more, over gRPC as over HTTP:
// past the server's tag cap RESOURCE_EXHAUSTED, a tag at the int64 limit
// FAILED_PRECONDITION; neither carries a RetryInfo, as waiting does not help.
func TestGRPC_TagLimits(t *testing.T) { eachTransport(t, testGRPC_TagLimits) }

func testGRPC_TagLimits(t *testing.T, tr transport) {
	st := openStore(t)
	if err := st.CreateTag(t.Context(), segment.Tag{Name: "full", MaxID: math.MaxInt64 - 100, Step: 100}); err != nil {
		t.Fatal(err)
	}
	alloc := newAllocator(t, st, segment.Options{AutoCreate: true, MaxTags: 1})
	h, err := server.New(server.Config{Segment: alloc, Ranges: alloc})
	if err != nil {
		t.Fatal(err)
	}
	base := serveH2(t, h)
	c := tr.client(t, h)
	// The last 100 IDs below the limit, then none.
	if a := do(t, "GET", base+"/segment/full?count=100", "", ""); a.status != 200 {
		t.Fatalf("the last IDs of full: %d %s", a.status, a.body)
	}
	for _, tc := range []struct {
		tag    string
		status int
		code   string
		rpc    connect.Code
	}{
		{"full", 503, "tag_exhausted", connect.CodeFailedPrecondition},
		{"ghost", 409, "tag_limit_reached", connect.CodeResourceExhausted},
	} {
		if a := do(t, "GET", base+"/segment/"+tc.tag, "", ""); a.status != tc.status || errCode(t, a.body) != tc.code {
			t.Fatalf("HTTP /segment/%s: %d %s, want %d %s", tc.tag, a.status, a.body, tc.status, tc.code)
		}
		_, err := c.Next(t.Context(), connect.NewRequest(&idgenv1.NextRequest{Tag: tc.tag, Mode: idgenv1.Mode_MODE_SEGMENT}))
		if code, retry, _ := idgenCode(t, err); connect.CodeOf(err) != tc.rpc || code != tc.code || retry != 0 {
			t.Fatalf("gRPC %s: %v (reason %q, retry %v), want %v %s", tc.tag, err, code, retry, tc.rpc, tc.code)
		}
	}
}
