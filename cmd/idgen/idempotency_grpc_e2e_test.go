package main_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/dbtest"
)

// rpcKeyed is one keyed Next call's outcome.
type rpcKeyed struct {
	msg      *idgenv1.NextResponse
	replayed bool
	code     connect.Code // 0 on success
	reason   string       // the idgen code of the ErrorInfo
}

func callKeyed(ctx context.Context, c idgenv1connect.IDServiceClient, m *idgenv1.NextRequest, key string) (rpcKeyed, error) {
	req := connect.NewRequest(m)
	req.Header().Set("Idempotency-Key", key)
	resp, err := c.Next(ctx, req)
	if err == nil {
		return rpcKeyed{msg: resp.Msg, replayed: resp.Header().Get("Idempotent-Replayed") == "true"}, nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return rpcKeyed{}, err
	}
	out := rpcKeyed{code: ce.Code()}
	for _, d := range ce.Details() {
		if v, _ := d.Value(); v != nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok {
				out.reason = ei.GetReason()
			}
		}
	}
	return out, nil
}

// Two real `idgen serve` processes on one PostgreSQL, over gRPC: 200
// keys, each sent 3 times at once and spread over both instances, get
// 200 distinct ID sets, each replayed identically, and the instances
// together allocate exactly one set per key. Then the refusals: the same
// key for another count, a key of the HTTP API, and a bad key.
func TestServe_IdempotencyGRPCTwoInstances(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t, t.TempDir())
	env := []string{"IDGEN_STORE=" + dbtest.Start(t, dbtest.Postgres).DSN}
	procs := []*proctest.Proc{
		proctest.Serve(t, bin, env, "--default-step", "20", "--access-log=false"),
		proctest.Serve(t, bin, env, "--default-step", "20", "--access-log=false", "--migrate=false"),
	}
	const keys, sends, wave, count = 200, 3, 50, 3
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	h2 := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Protocols: p}}
	rpcs := make([]idgenv1connect.IDServiceClient, len(procs))
	for i, pr := range procs {
		rpcs[i] = idgenv1connect.NewIDServiceClient(h2, pr.URL, connect.WithGRPC())
	}
	tag := segmenttest.UniqueTag("idemrpc")
	req := &idgenv1.NextRequest{Tag: tag, Count: count}

	answers := make([][]*idgenv1.NextResponse, keys)
	var mu sync.Mutex
	var aborted, replays int
	concurrentWaves(t, keys, sends, wave, func(i, s int) {
		key := fmt.Sprintf("order-%04d", i)
		ans, polls, err := pollKeyed(func() (rpcKeyed, error) { return callKeyed(ctx, rpcs[(i+s)%len(rpcs)], req, key) },
			func(a rpcKeyed) bool { return a.code == connect.CodeAborted && a.reason == "idempotency_key_in_flight" })
		if err != nil || ans.code != 0 {
			t.Errorf("%s: %v %v %s", key, err, ans.code, ans.reason)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		aborted += polls
		answers[i] = append(answers[i], ans.msg)
		if ans.replayed {
			replays++
		}
	})

	seen := map[string]int{}
	var all []int64
	for i, as := range answers {
		if len(as) != sends {
			t.Fatalf("key %d: %d answers; want %d", i, len(as), sends)
		}
		for _, a := range as[1:] {
			if !proto.Equal(a, as[0]) {
				t.Fatalf("key %d got two answers: %v and %v", i, as[0], a)
			}
		}
		ids := as[0].GetIds()
		if len(ids) != count || as[0].GetTag() != tag || !slices.IsSorted(ids) {
			t.Fatalf("key %d: %v", i, as[0])
		}
		set := fmt.Sprint(ids)
		if other, dup := seen[set]; dup {
			t.Fatalf("keys %d and %d got the same IDs %s", other, i, set)
		}
		seen[set] = i
		all = append(all, ids...)
	}
	if len(seen) != keys || segmenttest.Duplicates(all) != 0 {
		t.Fatalf("%d distinct ID sets, %d duplicate IDs; want %d and 0", len(seen), segmenttest.Duplicates(all), keys)
	}
	if replays != keys*(sends-1) {
		t.Errorf("%d answers said Idempotent-Replayed; want %d", replays, keys*(sends-1))
	}
	// Exactly one set allocated per key: no concurrent first call
	// allocated twice.
	hc := &http.Client{Timeout: 30 * time.Second}
	var issued, stored float64
	for _, pr := range procs {
		issued += metric(t, ctx, hc, pr, "idgen_ids_issued_total", `tag="`+tag+`"`)
		stored += metric(t, ctx, hc, pr, "idgen_idempotency_keys_stored_total", "")
	}
	if issued != keys*count || stored != keys {
		t.Fatalf("the instances issued %v IDs of %s and stored %v keys; want %d and %d", issued, tag, stored, keys*count, keys)
	}

	for i := range 20 {
		key := fmt.Sprintf("order-%04d", i)
		// A late repeat replays, from the other instance.
		ans, err := callKeyed(ctx, rpcs[(i+1)%len(rpcs)], req, key)
		if err != nil || !ans.replayed || !proto.Equal(ans.msg, answers[i][0]) {
			t.Fatalf("late repeat of %s: %+v %v; want %v replayed", key, ans, err, answers[i][0])
		}
		// The same key for another count: FAILED_PRECONDITION, on either.
		ans, err = callKeyed(ctx, rpcs[i%len(rpcs)], &idgenv1.NextRequest{Tag: tag, Count: count - 1}, key)
		if err != nil || ans.code != connect.CodeFailedPrecondition || ans.reason != "idempotency_key_reused" {
			t.Fatalf("reused %s: %+v %v; want FAILED_PRECONDITION idempotency_key_reused", key, ans, err)
		}
		// A gRPC key over HTTP, and an HTTP key over gRPC: refused, not
		// replayed, since the answers differ.
		h, err := sendKeyed(ctx, hc, procs[(i+1)%len(procs)], fmt.Sprintf("/id/%s?count=%d", tag, count), key)
		if err != nil || h.status != http.StatusUnprocessableEntity || h.code != "idempotency_key_reused" {
			t.Fatalf("gRPC key %s over HTTP: %+v %v; want 422 idempotency_key_reused", key, h, err)
		}
		hkey := "http-" + key
		if h, err := sendKeyed(ctx, hc, procs[i%len(procs)], fmt.Sprintf("/id/%s?count=%d", tag, count), hkey); err != nil || h.status != 200 {
			t.Fatalf("HTTP key %s: %+v %v", hkey, h, err)
		}
		ans, err = callKeyed(ctx, rpcs[(i+1)%len(rpcs)], req, hkey)
		if err != nil || ans.code != connect.CodeFailedPrecondition || ans.reason != "idempotency_key_reused" {
			t.Fatalf("HTTP key %s over gRPC: %+v %v; want FAILED_PRECONDITION idempotency_key_reused", hkey, ans, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("k", 256), `"a"b"`} {
		ans, err := callKeyed(ctx, rpcs[0], req, bad)
		if err != nil || ans.code != connect.CodeInvalidArgument || ans.reason != "invalid_idempotency_key" {
			t.Fatalf("key %q: %+v %v; want INVALID_ARGUMENT invalid_idempotency_key", bad, ans, err)
		}
	}
	t.Logf("%d keys x %d concurrent gRPC sends over %d instances on PostgreSQL: %d distinct ID sets, %d duplicate IDs, %v IDs issued, %d answers ABORTED before the first completed",
		keys, sends, len(procs), len(seen), segmenttest.Duplicates(all), issued, aborted)
}

// grpcurl sends the key as -H metadata and shows the replay in the
// response headers, and the refusal's code and idgen reason.
func TestServe_IdempotencyGRPCurl(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	grpcurl := proctest.Tool(t, dir, "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")}, "--access-log=false")
	// docs/idempotency.md: the HTTP example's key, then the gRPC
	// example's own key.
	callKey := func(key, body string) (string, error) {
		return runTool(t, grpcurl, "-plaintext", "-v", "-H", "idempotency-key: "+key, "-H", "idempotency-ttl: 600",
			"-d", body, p.Addr(), "idgen.v1.IDService/Next")
	}
	call := func(body string) (string, error) { return callKey("order-9b2e", body) }
	req, _ := http.NewRequest("GET", "http://"+p.Addr()+"/id/order?count=2", nil)
	req.Header.Set("Idempotency-Key", "order-c7f1")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HTTP example: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	out, err := callKey("order-c7f1", `{"tag":"order","count":2}`)
	if err == nil || !strings.Contains(out, "Code: FailedPrecondition") || !strings.Contains(out, "the other API") {
		t.Fatalf("the HTTP example's key over gRPC: %v\n%s\nwant FailedPrecondition naming the other API", err, out)
	}
	first, err := call(`{"tag":"order","count":2}`)
	if err != nil || strings.Contains(first, "idempotent-replayed") || !strings.Contains(responseBody(first), `"ids"`) {
		t.Fatalf("first: %v\n%s", err, first)
	}
	again, err := call(`{"tag":"order","count":2}`)
	if err != nil || !strings.Contains(again, "idempotent-replayed: true") || responseBody(again) != responseBody(first) {
		t.Fatalf("repeat: %v\n%s\nwant the first answer replayed:\n%s", err, again, first)
	}
	out, err = call(`{"tag":"order","count":3}`)
	if err == nil || !strings.Contains(out, "Code: FailedPrecondition") || !strings.Contains(out, `"reason": "idempotency_key_reused"`) {
		t.Fatalf("reused key: %v\n%s", err, out)
	}
}

// responseBody is the message grpcurl -v printed, between "Response
// contents:" and the trailers.
func responseBody(out string) string {
	_, body, _ := strings.Cut(out, "Response contents:")
	body, _, _ = strings.Cut(body, "Response trailers received:")
	return strings.TrimSpace(body)
}
