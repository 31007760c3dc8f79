package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/server"
)

// keyedCall calls Next with the metadata md (name, value, …).
func keyedCall(ctx context.Context, c idgenv1connect.IDServiceClient, m *idgenv1.NextRequest, md ...string) (*connect.Response[idgenv1.NextResponse], error) {
	req := connect.NewRequest(m)
	for i := 0; i+1 < len(md); i += 2 {
		req.Header().Add(md[i], md[i+1])
	}
	return c.Next(ctx, req)
}

// rpcRefusal checks that err is a gRPC status code with the idgen
// ErrorInfo reason want, and returns its RetryInfo delay.
func rpcRefusal(t *testing.T, what string, err error, code connect.Code, want string) time.Duration {
	t.Helper()
	if err == nil || connect.CodeOf(err) != code {
		t.Fatalf("%s: %v; want %v %s", what, err, code, want)
	}
	got, retry, _ := idgenCode(t, err)
	if got != want {
		t.Fatalf("%s: idgen code %q; want %q (%v)", what, got, want, err)
	}
	return retry
}

func TestGRPC_IdempotencyReplays(t *testing.T) { eachTransport(t, testGRPC_IdempotencyReplays) }

func testGRPC_IdempotencyReplays(t *testing.T, tr transport) {
	base, c := rpcServer(t, tr, server.Config{MaxBatch: 50, Idempotency: newKeeper(t, idempotency.Config{})})
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		req  *idgenv1.NextRequest
	}{
		{"one", &idgenv1.NextRequest{Tag: "order"}},
		{"batch", &idgenv1.NextRequest{Tag: "order", Count: 5}},
		{"prefixed segment batch", &idgenv1.NextRequest{Tag: "order", Count: 2, Mode: idgenv1.Mode_MODE_SEGMENT, Format: idgenv1.Format_FORMAT_PREFIXED}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "k-" + tc.name
			first, err := keyedCall(ctx, c, tc.req, "Idempotency-Key", key, "Idempotency-TTL", "60")
			if err != nil || first.Header().Get(idempotency.ReplayedHeader) != "" || len(first.Msg.GetIds()) != max(int(tc.req.GetCount()), 1) {
				t.Fatalf("first: %v %v", first, err)
			}
			// Between the two, other calls move the tag on.
			if _, err := c.Next(ctx, connect.NewRequest(&idgenv1.NextRequest{Tag: "order", Count: 3})); err != nil {
				t.Fatal(err)
			}
			again, err := keyedCall(ctx, c, tc.req, "Idempotency-Key", key)
			if err != nil || !proto.Equal(again.Msg, first.Msg) || again.Header().Get(idempotency.ReplayedHeader) != "true" {
				t.Fatalf("repeat: %v %v; want %v replayed", again, err, first.Msg)
			}
		})
	}

	// The same key for another count, format or mode is refused.
	for _, other := range []*idgenv1.NextRequest{
		{Tag: "order", Count: 1}, // count 0 and 1 are two requests, as over HTTP
		{Tag: "order", Count: 6},
		{Tag: "order", Count: 5, Format: idgenv1.Format_FORMAT_PREFIXED},
	} {
		_, err := keyedCall(ctx, c, other, "Idempotency-Key", "k-batch")
		rpcRefusal(t, other.String(), err, connect.CodeFailedPrecondition, "idempotency_key_reused")
	}
	// MODE_UNSPECIFIED is the server's mode: one request with MODE_SEGMENT.
	seg, err := keyedCall(ctx, c, &idgenv1.NextRequest{Tag: "order", Count: 5, Mode: idgenv1.Mode_MODE_SEGMENT}, "Idempotency-Key", "k-batch")
	if err != nil || seg.Header().Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("MODE_SEGMENT for the default mode: %v %v; want a replay", seg, err)
	}

	// The Connect protocol with JSON, on HTTP/1.1, replays a gRPC call:
	// one recorded message, whatever the protocol and codec.
	cj := idgenv1connect.NewIDServiceClient(http.DefaultClient, base, connect.WithProtoJSON())
	j, err := keyedCall(ctx, cj, &idgenv1.NextRequest{Tag: "order", Count: 5}, "Idempotency-Key", "k-batch")
	if err != nil || j.Header().Get(idempotency.ReplayedHeader) != "true" || !proto.Equal(j.Msg, seg.Msg) {
		t.Fatalf("Connect JSON: %v %v; want %v replayed", j, err, seg.Msg)
	}

	// HTTP and gRPC answers differ, so a key of one API is refused on the
	// other rather than replayed, in both directions.
	if a := keyed(t, base+"/id/order", "k-http"); a.status != 200 {
		t.Fatalf("HTTP: %d %s", a.status, a.body)
	}
	_, err = keyedCall(ctx, c, &idgenv1.NextRequest{Tag: "order"}, "Idempotency-Key", "k-http")
	rpcRefusal(t, "gRPC after HTTP", err, connect.CodeFailedPrecondition, "idempotency_key_reused")
	if a := keyed(t, base+"/id/order", "k-one"); a.status != 422 || errCode(t, a.body) != "idempotency_key_reused" {
		t.Fatalf("HTTP after gRPC: %d %s; want 422 idempotency_key_reused", a.status, a.body)
	}
}

func TestGRPC_IdempotencyBadMetadata(t *testing.T) { eachTransport(t, testGRPC_IdempotencyBadMetadata) }

func testGRPC_IdempotencyBadMetadata(t *testing.T, tr transport) {
	_, c := rpcServer(t, tr, server.Config{Idempotency: newKeeper(t, idempotency.Config{TTL: time.Minute, MaxTTL: time.Hour})})
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		md   []string
		want string
	}{
		{"empty key", []string{"Idempotency-Key", ""}, "invalid_idempotency_key"},
		{"long key", []string{"Idempotency-Key", strings.Repeat("k", idempotency.MaxKeyLength+1)}, "invalid_idempotency_key"},
		{"two keys", []string{"Idempotency-Key", "a", "Idempotency-Key", "b"}, "invalid_idempotency_key"},
		{"bad quoting", []string{"Idempotency-Key", `"a"b"`}, "invalid_idempotency_key"},
		{"zero TTL", []string{"Idempotency-Key", "k", "Idempotency-TTL", "0"}, "invalid_idempotency_ttl"},
		{"TTL above the max", []string{"Idempotency-Key", "k", "Idempotency-TTL", "3601"}, "invalid_idempotency_ttl"},
	} {
		_, err := keyedCall(ctx, c, &idgenv1.NextRequest{Tag: "order"}, tc.md...)
		rpcRefusal(t, tc.name, err, connect.CodeInvalidArgument, tc.want)
	}
	// None of them allocated: the first ID is still the tag's first.
	one, err := c.Next(ctx, connect.NewRequest(&idgenv1.NextRequest{Tag: "order"}))
	if err != nil || one.Msg.GetIds()[0] != 1001 {
		t.Fatalf("after the refusals: %v %v; want 1001", one, err)
	}
}

func TestGRPC_IdempotencyDisabled(t *testing.T) { eachTransport(t, testGRPC_IdempotencyDisabled) }

func testGRPC_IdempotencyDisabled(t *testing.T, tr transport) {
	_, c := rpcServer(t, tr, server.Config{})
	_, err := keyedCall(t.Context(), c, &idgenv1.NextRequest{Tag: "order"}, "Idempotency-Key", "k")
	rpcRefusal(t, "disabled", err, connect.CodeUnimplemented, "idempotency_disabled")
}

// Keys belong to their caller's token, over gRPC as over HTTP, and one
// scope serves both APIs.
func TestGRPC_IdempotencyScopedByToken(t *testing.T) {
	eachTransport(t, testGRPC_IdempotencyScopedByToken)
}

func testGRPC_IdempotencyScopedByToken(t *testing.T, tr transport) {
	tokA, tokB := strings.Repeat("a", 20), strings.Repeat("b", 20)
	base, c := rpcServer(t, tr, server.Config{APITokens: server.APITokens{tokA: {"*"}, tokB: {"*"}},
		Idempotency: newKeeper(t, idempotency.Config{})})
	ctx := t.Context()
	call := func(tok string) (*connect.Response[idgenv1.NextResponse], error) {
		return keyedCall(ctx, c, &idgenv1.NextRequest{Tag: "order"}, "Authorization", "Bearer "+tok, "Idempotency-Key", "shared")
	}
	a, errA := call(tokA)
	b, errB := call(tokB)
	a2, errA2 := call(tokA)
	if errA != nil || errB != nil || errA2 != nil || proto.Equal(a.Msg, b.Msg) || !proto.Equal(a.Msg, a2.Msg) ||
		b.Header().Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("A %v, B %v, A again %v (%v %v %v): B must get its own IDs, A its own back", a, b, a2, errA, errB, errA2)
	}
	// B's key over HTTP is B's gRPC key: refused as another request.
	if h := do(t, "GET", base+"/id/order", tokB, "", "Idempotency-Key", "shared"); h.status != 422 {
		t.Fatalf("B over HTTP: %d %s; want 422", h.status, h.body)
	}
	_, err := keyedCall(ctx, c, &idgenv1.NextRequest{Tag: "order"}, "Idempotency-Key", "shared")
	rpcRefusal(t, "no token", err, connect.CodeUnauthenticated, "unauthorized")
}

// gateRPC serves g over gRPC with a memory keeper of cfg.
func gateRPC(t *testing.T, tr transport, g *gate, cfg idempotency.Config) idgenv1connect.IDServiceClient {
	t.Helper()
	h, err := server.New(server.Config{Segment: g, Idempotency: newKeeper(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	return tr.client(t, h)
}

// Repeats while the first call runs get ABORTED with the lock's wait in
// RetryInfo; the first call alone allocates.
func TestGRPC_IdempotencyInFlight(t *testing.T) { eachTransport(t, testGRPC_IdempotencyInFlight) }

func testGRPC_IdempotencyInFlight(t *testing.T, tr transport) {
	g := &gate{release: make(chan struct{})}
	c := gateRPC(t, tr, g, idempotency.Config{LockTimeout: 30 * time.Second})
	ctx := t.Context()
	req := &idgenv1.NextRequest{Tag: "order", Count: 3}
	type result struct {
		resp *connect.Response[idgenv1.NextResponse]
		err  error
	}
	first := make(chan result, 1)
	go func() {
		r, err := keyedCall(ctx, c, req, "Idempotency-Key", "k")
		first <- result{r, err}
	}()
	g.waitAllocating(t)
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			_, err := keyedCall(ctx, c, req, "Idempotency-Key", "k")
			if connect.CodeOf(err) != connect.CodeAborted {
				t.Errorf("repeat in flight: %v; want ABORTED", err)
				return
			}
			// The server waited its half second first; the wait fits the
			// lock's age, not the whole 30s lock.
			if code, retry, _ := idgenCode(t, err); code != "idempotency_key_in_flight" || retry < time.Second || retry > 3*time.Second {
				t.Errorf("repeat in flight: %s, RetryInfo %v; want idempotency_key_in_flight and 1s to 3s", code, retry)
			}
		})
	}
	wg.Wait()
	close(g.release)
	r := <-first
	if r.err != nil || len(r.resp.Msg.GetIds()) != 3 || g.calls.Load() != 1 {
		t.Fatalf("first: %v %v after %d allocations; want 3 IDs after 1", r.resp, r.err, g.calls.Load())
	}
	again, err := keyedCall(ctx, c, req, "Idempotency-Key", "k")
	if err != nil || !proto.Equal(again.Msg, r.resp.Msg) || g.calls.Load() != 1 {
		t.Fatalf("after: %v %v after %d allocations; want %v after 1", again, err, g.calls.Load(), r.resp.Msg)
	}
}

// A failed first call frees its key (UNAVAILABLE with RetryInfo), so
// that its retry allocates.
func TestGRPC_IdempotencyFailureFreesTheKey(t *testing.T) {
	eachTransport(t, testGRPC_IdempotencyFailureFreesTheKey)
}

func testGRPC_IdempotencyFailureFreesTheKey(t *testing.T, tr transport) {
	g := &gate{}
	c := gateRPC(t, tr, g, idempotency.Config{})
	ctx := t.Context()
	one := &idgenv1.NextRequest{Tag: "order"}
	g.fail.Store(true)
	_, err := keyedCall(ctx, c, one, "Idempotency-Key", "a")
	if retry := rpcRefusal(t, "failing allocation", err, connect.CodeUnavailable, "unavailable"); retry != time.Second {
		t.Fatalf("RetryInfo %v; want 1s", retry)
	}
	g.fail.Store(false)
	a, err := keyedCall(ctx, c, one, "Idempotency-Key", "a")
	if err != nil || a.Header().Get(idempotency.ReplayedHeader) != "" || a.Msg.GetIds()[0] != 1 {
		t.Fatalf("retry: %v %v; want a first answer with ID 1", a, err)
	}
}

// The cap refuses new keys with RESOURCE_EXHAUSTED but replays live ones.
func TestGRPC_IdempotencyCap(t *testing.T) { eachTransport(t, testGRPC_IdempotencyCap) }

func testGRPC_IdempotencyCap(t *testing.T, tr transport) {
	c := gateRPC(t, tr, &gate{}, idempotency.Config{MaxKeys: 2})
	ctx := t.Context()
	one := &idgenv1.NextRequest{Tag: "order"}
	for _, k := range []string{"a", "b"} {
		if _, err := keyedCall(ctx, c, one, "Idempotency-Key", k); err != nil {
			t.Fatal(err)
		}
	}
	_, err := keyedCall(ctx, c, one, "Idempotency-Key", "c")
	rpcRefusal(t, "third key", err, connect.CodeResourceExhausted, "idempotency_key_limit_reached")
	if r, err := keyedCall(ctx, c, one, "Idempotency-Key", "a"); err != nil || r.Header().Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("repeat at the cap: %v %v", r, err)
	}
}

// Calls without the metadata never touch the keys: after them, a keeper
// capped at one key still takes a first one.
func TestGRPC_UnkeyedCallsIgnoreKeys(t *testing.T) { eachTransport(t, testGRPC_UnkeyedCallsIgnoreKeys) }

func testGRPC_UnkeyedCallsIgnoreKeys(t *testing.T, tr transport) {
	g := &gate{}
	c := gateRPC(t, tr, g, idempotency.Config{MaxKeys: 1})
	for range 3 {
		if _, err := c.Next(t.Context(), connect.NewRequest(&idgenv1.NextRequest{Tag: "order"})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := keyedCall(t.Context(), c, &idgenv1.NextRequest{Tag: "order"}, "Idempotency-Key", "only"); err != nil {
		t.Fatalf("first keyed call after unkeyed ones: %v", err)
	}
	if g.calls.Load() != 4 {
		t.Fatalf("%d allocations; want 4", g.calls.Load())
	}
}

// ReserveRange keeps no keys: a key is refused, not ignored, so that a
// retry does not take a second range.
func TestGRPC_ReserveRangeRefusesAKey(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		_, c := rpcServer(t, tr, server.Config{Idempotency: newKeeper(t, idempotency.Config{})})
		req := connect.NewRequest(&idgenv1.ReserveRangeRequest{Tag: "order", Size: 10})
		req.Header().Set("Idempotency-Key", "k")
		_, err := c.ReserveRange(t.Context(), req)
		rpcRefusal(t, "ReserveRange with a key", err, connect.CodeInvalidArgument, "idempotency_not_supported")
	})
}
