package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

func newKeeper(t *testing.T, cfg idempotency.Config) *idempotency.Keeper {
	t.Helper()
	k, err := idempotency.New(idempotency.NewMemory(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}

func keyed(t *testing.T, url, key string, hdr ...string) answer {
	t.Helper()
	return do(t, "GET", url, "", "", append([]string{"Idempotency-Key", key}, hdr...)...)
}

func TestServer_IdempotencyReplays(t *testing.T) {
	t.Parallel()
	m := server.NewMetrics()
	ts := newServer(t, server.Config{MaxBatch: 50, Metrics: m, Idempotency: newKeeper(t, idempotency.Config{Observer: m})})
	for _, tc := range []struct {
		name, path string
		hdr        []string
	}{
		{"one", "/id/order", nil},
		{"batch", "/id/order?count=5", nil},
		{"text batch", "/segment/order?count=3", []string{"Accept", "text/plain"}},
		{"prefixed", "/id/order?count=2&format=prefixed", nil},
		{"quoted key", "/id/order", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "k-" + tc.name
			if tc.name == "quoted key" {
				key = `"k-quoted"`
			}
			first := keyed(t, ts.URL+tc.path, key, tc.hdr...)
			if first.status != 200 || first.header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("first: %d %q replayed=%q", first.status, first.body, first.header.Get("Idempotent-Replayed"))
			}
			// Between the two, other requests move the tag on.
			if a := get(t, "GET", ts.URL+"/id/order?count=3", nil); a.status != 200 {
				t.Fatal(a.body)
			}
			again := keyed(t, ts.URL+tc.path, key, tc.hdr...)
			if again.status != 200 || again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" ||
				again.header.Get("Content-Type") != first.header.Get("Content-Type") {
				t.Fatalf("repeat: %d %q %v; want %q replayed", again.status, again.body, again.header, first.body)
			}
		})
	}
	// /id/ is /segment/ on a segment server: one request.
	a := keyed(t, ts.URL+"/id/order", "k-one")
	b := keyed(t, ts.URL+"/segment/order", "k-one")
	if a.body != b.body || b.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("/id and /segment: %q %q", a.body, b.body)
	}
	// The same key for anything else is refused.
	for _, other := range []struct {
		path string
		hdr  []string
	}{
		{"/id/order?count=2", nil},
		{"/id/order?format=prefixed", nil},
		{"/id/order", []string{"Accept", "text/plain"}},
	} {
		if a := keyed(t, ts.URL+other.path, "k-one", other.hdr...); a.status != 422 || errCode(t, a.body) != "idempotency_key_reused" {
			t.Errorf("%s %v with a used key: %d %q; want 422 idempotency_key_reused", other.path, other.hdr, a.status, a.body)
		}
	}
	// Bad input.
	for _, bad := range []struct {
		hdr  []string
		code string
	}{
		{[]string{"Idempotency-Key", ""}, "invalid_idempotency_key"},
		{[]string{"Idempotency-Key", strings.Repeat("k", 256)}, "invalid_idempotency_key"},
		{[]string{"Idempotency-Key", "caf\u00e9"}, "invalid_idempotency_key"},
		{[]string{"Idempotency-Key", "k", "Idempotency-TTL", "0"}, "invalid_idempotency_ttl"},
		{[]string{"Idempotency-Key", "k", "Idempotency-TTL", "604801"}, "invalid_idempotency_ttl"},
		{[]string{"Idempotency-Key", "k", "Idempotency-TTL", "1h"}, "invalid_idempotency_ttl"},
	} {
		a := do(t, "GET", ts.URL+"/id/order", "", "", bad.hdr...)
		if a.status != 400 || errCode(t, a.body) != bad.code {
			t.Errorf("%q: %d %q; want 400 %s", bad.hdr, a.status, a.body, bad.code)
		}
	}
	req, _ := http.NewRequest("GET", ts.URL+"/id/order", nil)
	req.Header.Add("Idempotency-Key", "a")
	req.Header.Add("Idempotency-Key", "b")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("two keys: %d; want 400", resp.StatusCode)
	}
	// A TTL within bounds is taken.
	if a := keyed(t, ts.URL+"/id/order", "k-ttl", "Idempotency-TTL", "604800"); a.status != 200 {
		t.Errorf("max TTL: %d %q", a.status, a.body)
	}
	metrics := get(t, "GET", ts.URL+"/metrics", nil).body
	for _, want := range []string{
		"idgen_idempotency_keys_stored_total 6",
		"idgen_idempotency_replays_total 7",
		`idgen_idempotency_conflicts_total{reason="reused"} 3`,
		`idgen_client_errors_total{code="invalid_idempotency_key"} 4`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(metrics, "idempotency"))
		}
	}
}

func TestServer_IdempotencyDisabled(t *testing.T) {
	t.Parallel()
	ts := newServer(t, server.Config{})
	if a := keyed(t, ts.URL+"/id/order", "k"); a.status != 400 || errCode(t, a.body) != "idempotency_disabled" {
		t.Fatalf("%d %q; want 400 idempotency_disabled", a.status, a.body)
	}
}

// Keys belong to their caller: another token's same key is a new key.
func TestServer_IdempotencyScopedByToken(t *testing.T) {
	t.Parallel()
	tokA, tokB := strings.Repeat("a", 20), strings.Repeat("b", 20)
	ts := newServer(t, server.Config{APITokens: server.APITokens{tokA: {"*"}, tokB: {"*"}},
		Idempotency: newKeeper(t, idempotency.Config{})})
	a := do(t, "GET", ts.URL+"/id/order", tokA, "", "Idempotency-Key", "shared")
	b := do(t, "GET", ts.URL+"/id/order", tokB, "", "Idempotency-Key", "shared")
	a2 := do(t, "GET", ts.URL+"/id/order", tokA, "", "Idempotency-Key", "shared")
	if a.status != 200 || b.status != 200 || a.body == b.body || a2.body != a.body || b.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("A %q, B %q, A again %q: B must get its own IDs, A its own back", a.body, b.body, a2.body)
	}
	if u := do(t, "GET", ts.URL+"/id/order", "", "", "Idempotency-Key", "shared"); u.status != 401 {
		t.Fatalf("without a token: %d; want 401 before any key lookup", u.status)
	}
}

// gate is a generator whose calls wait until released, and that fails
// while fail is set.
type gate struct {
	calls   atomic.Int32
	next    atomic.Int64
	release chan struct{}
	fail    atomic.Bool
}

func (g *gate) Next(ctx context.Context, tag string) (int64, error) {
	ids, err := g.NextN(ctx, tag, 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

func (g *gate) NextN(ctx context.Context, _ string, n int) ([]int64, error) {
	g.calls.Add(1)
	if g.release != nil {
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if g.fail.Load() {
		return nil, fmt.Errorf("store down: %w", segment.ErrUnavailable)
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = g.next.Add(1)
	}
	return out, nil
}

// waitAllocating waits until the first request reached the allocator.
func (g *gate) waitAllocating(t *testing.T) {
	t.Helper()
	if !testtime.Until(time.Minute, time.Millisecond, func() bool { return g.calls.Load() > 0 }) {
		t.Fatal("no request reached the allocator")
	}
}

// lookups is a Store that counts Get: a key's first request wins its
// Insert and reads nothing, and a repeat reads the row it lost to.
type lookups struct {
	idempotency.Store
	gets atomic.Int32
}

func (l *lookups) Get(ctx context.Context, scope, key string) (idempotency.Record, bool, error) {
	l.gets.Add(1)
	return l.Store.Get(ctx, scope, key)
}

func gateServer(t *testing.T, g *gate, cfg idempotency.Config) *httptest.Server {
	t.Helper()
	h, err := server.New(server.Config{Segment: g, Idempotency: newKeeper(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

func TestServer_IdempotencyInFlight(t *testing.T) {
	t.Parallel()
	g := &gate{release: make(chan struct{})}
	ts := gateServer(t, g, idempotency.Config{LockTimeout: 30 * time.Second})
	first := make(chan answer, 1)
	go func() { first <- keyed(t, ts.URL+"/id/order?count=3", "k") }()
	g.waitAllocating(t)
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			a := keyed(t, ts.URL+"/id/order?count=3", "k")
			if a.status != 409 || errCode(t, a.body) != "idempotency_key_in_flight" {
				t.Errorf("repeat in flight: %d %q; want 409", a.status, a.body)
			}
			// The server waited its half second first; the wait fits the
			// lock's age (under 3s here), not the whole 30s lock.
			if ra := a.header.Get("Retry-After"); ra != "1" && ra != "2" && ra != "3" {
				t.Errorf("Retry-After %q; want 1 to 3", ra)
			}
		})
	}
	wg.Wait()
	close(g.release)
	a := <-first
	if a.status != 200 || g.calls.Load() != 1 {
		t.Fatalf("first: %d %q after %d allocations; want 200 after 1", a.status, a.body, g.calls.Load())
	}
	if b := keyed(t, ts.URL+"/id/order?count=3", "k"); b.body != a.body || g.calls.Load() != 1 {
		t.Fatalf("after: %q after %d allocations; want %q after 1", b.body, g.calls.Load(), a.body)
	}
}

// A first request that fails allocates nothing and records nothing: the
// retry allocates.
func TestServer_IdempotencyFailureFreesTheKey(t *testing.T) {
	t.Parallel()
	g := &gate{}
	g.fail.Store(true)
	ts := gateServer(t, g, idempotency.Config{})
	if a := keyed(t, ts.URL+"/id/order", "k"); a.status != 503 || a.header.Get("Retry-After") != "1" {
		t.Fatalf("failing allocation: %d %q", a.status, a.body)
	}
	g.fail.Store(false)
	a := keyed(t, ts.URL+"/id/order", "k")
	if a.status != 200 || a.header.Get("Idempotent-Replayed") != "" || a.body != `{"tag":"order","id":"1"}`+"\n" {
		t.Fatalf("retry: %d %q %v; want a first answer", a.status, a.body, a.header)
	}
}

func TestServer_IdempotencyCap(t *testing.T) {
	t.Parallel()
	ts := gateServer(t, &gate{}, idempotency.Config{MaxKeys: 2})
	for _, k := range []string{"a", "b"} {
		if a := keyed(t, ts.URL+"/id/order", k); a.status != 200 {
			t.Fatal(a.body)
		}
	}
	if a := keyed(t, ts.URL+"/id/order", "c"); a.status != 429 || errCode(t, a.body) != "idempotency_key_limit_reached" || a.header.Get("Retry-After") != "1" {
		t.Fatalf("third key: %d %q Retry-After %q; want 429 with Retry-After 1", a.status, a.body, a.header.Get("Retry-After"))
	}
	if a := keyed(t, ts.URL+"/id/order", "a"); a.status != 200 || a.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat at the cap: %d %q", a.status, a.body)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A repeat that comes while the first request runs, and the first ends
// within the server's wait, gets the replay, not a 409.
func TestServer_IdempotencyRepeatWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	g := &gate{release: make(chan struct{})}
	st := &lookups{Store: idempotency.NewMemory()}
	k, err := idempotency.New(st, idempotency.Config{InFlightWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	ts := gateServerWith(t, g, k)
	first := make(chan answer, 1)
	go func() { first <- keyed(t, ts.URL+"/id/order?count=3", "k") }()
	g.waitAllocating(t)
	second := make(chan answer, 1)
	go func() { second <- keyed(t, ts.URL+"/id/order?count=3", "k") }()
	if !testtime.Until(time.Minute, time.Millisecond, func() bool { return st.gets.Load() > 0 }) {
		t.Fatal("the repeat never saw the first in flight")
	}
	close(g.release)
	a, b := <-first, <-second
	if a.status != 200 || b.status != 200 || b.body != a.body || b.header.Get("Idempotent-Replayed") != "true" || g.calls.Load() != 1 {
		t.Fatalf("first %d %q, repeat %d %q replayed=%q, %d allocations; want the replay and 1 allocation",
			a.status, a.body, b.status, b.body, b.header.Get("Idempotent-Replayed"), g.calls.Load())
	}
}

// A key where it cannot work is refused with 400, not ignored: a range
// and the routes of other services' APIs record no answer.
func TestServer_IdempotencyNotSupported(t *testing.T) {
	t.Parallel()
	tsRange := newServerWith(t, server.Config{Idempotency: newKeeper(t, idempotency.Config{}),
		Compat: server.Compat{Leaf: true, TinyID: true}})
	for _, tc := range []struct{ method, path string }{
		{"POST", "/segment/order/range?size=10"},
		{"GET", "/api/segment/get/order"},
		{"GET", "/tinyid/id/nextIdSimple?bizType=order"},
		{"POST", "/tinyid/id/nextId?bizType=order"},
		{"GET", "/tinyid/id/nextSegmentId?bizType=order"},
	} {
		a := do(t, tc.method, tsRange.URL+tc.path, "", "", "Idempotency-Key", "k")
		if a.status != 400 || !strings.Contains(a.body, "idempotency_not_supported") {
			t.Errorf("%s %s with a key: %d %q; want 400 idempotency_not_supported", tc.method, tc.path, a.status, a.body)
		}
	}
	// Without a key the range route serves.
	if a := do(t, "POST", tsRange.URL+"/segment/order/range?size=10", "", ""); a.status != 200 {
		t.Fatalf("range without a key: %d %q", a.status, a.body)
	}
}

// newServerWith is newServer with the range route served too.
func newServerWith(t *testing.T, cfg server.Config) *httptest.Server {
	t.Helper()
	st := openStore(t)
	if err := st.CreateTag(context.Background(), segment.Tag{Name: "order", MaxID: 1_000_000, Step: 100}); err != nil {
		t.Fatal(err)
	}
	alloc := newAllocator(t, st, segment.Options{})
	cfg.Segment, cfg.Ranges = alloc, alloc
	h, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// With a cap of 1,000 and keys of 1s, 1,500 requests spread over three
// seconds are all served: the cap counts live keys (about 500 at any
// time here), not every key since the last sweep (no sweep runs), since
// a scope is counted again before it is refused. The keeper's fake clock
// moves 200 ms between batches, whatever the machine's speed. -short
// scales the cap and the batches down by 5: the same proportions, a
// fifth of the commits.
func TestServer_IdempotencyCapCountsLiveKeys(t *testing.T) {
	t.Parallel()
	perBatch := 100
	if testing.Short() {
		perBatch = 20
	}
	st := openStore(t)
	clock := testtime.New(time.Now())
	k, err := idempotency.New(st.Idempotency(), idempotency.Config{MaxKeys: int64(10 * perBatch), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	ts := gateServerWith(t, &gate{}, k)
	refused := 0
	for batch := range 15 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range perBatch {
			wg.Go(func() {
				a := keyed(t, ts.URL+"/id/order", fmt.Sprintf("k-%d-%d", batch, i), "Idempotency-TTL", "1")
				if a.status != 200 {
					mu.Lock()
					refused++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		clock.Advance(200 * time.Millisecond)
	}
	if refused != 0 {
		t.Fatalf("%d of %d requests refused under a cap of %d live keys of 1s; want 0", refused, 15*perBatch, 10*perBatch)
	}
}

func gateServerWith(t *testing.T, g *gate, k *idempotency.Keeper) *httptest.Server {
	t.Helper()
	h, err := server.New(server.Config{Segment: g, Idempotency: k})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}
