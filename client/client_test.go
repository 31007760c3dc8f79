package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/store/sqlite"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

var _ idgen.Generator = (*client.Client)(nil)

// startServer runs a real idgen server over a store on the SQLite file at
// path, as one instance of a deployment would.
func startServer(t testing.TB, path string, cfg server.Config) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	alloc, err := segment.New(st, segment.Options{AutoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alloc.Close() })
	cfg.Segment, cfg.Ranges = alloc, alloc
	h, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, h)
}

// serve runs h on an httptest server that speaks HTTP/1.1 and cleartext
// HTTP/2, as idgen serve does, so that both transports of the client
// reach it.
func serve(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetHTTP1(true)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// Four clients, two per server, two servers on one database: caching
// ranges locally must never hand out an ID twice.
func TestClient_SegmentUniqueAcrossClientsAndServers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.db")
	s1 := startServer(t, path, server.Config{})
	s2 := startServer(t, path, server.Config{})
	checkUniqueAcross(t, []string{s1.URL, s2.URL, s1.URL, s2.URL})
}

// checkUniqueAcross runs a caching allocator of a client of each base,
// four callers each, and fails on any ID handed out twice.
func checkUniqueAcross(t *testing.T, bases []string, opts ...client.Option) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	for _, base := range bases {
		c, err := client.New(base, opts...)
		if err != nil {
			t.Fatal(err)
		}
		alloc, err := c.Segment(segment.Options{FixedStep: true})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer alloc.Close()
			ids := segmenttest.CheckUnique(t, 4, 2500, func() (int64, error) { return alloc.Next(ctx, "order") })
			mu.Lock()
			all = append(all, ids...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if d := segmenttest.Duplicates(all); d != 0 || len(all) != len(bases)*4*2500 {
		t.Fatalf("%d IDs, %d duplicates; want %d and 0", len(all), d, len(bases)*4*2500)
	}
}

func TestClient_PerIDCalls(t *testing.T) {
	t.Parallel()
	ts := startServer(t, filepath.Join(t.TempDir(), "idgen.db"), server.Config{})
	c, err := client.New(ts.URL, client.WithMode("segment"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := c.Next(ctx, "order")
	if err != nil || id != 1 {
		t.Fatalf("Next = %d, %v; want 1", id, err)
	}
	ids, err := c.NextN(ctx, "order", 3)
	if err != nil || len(ids) != 3 || ids[0] != 2 || ids[2] != 4 {
		t.Fatalf("NextN = %v, %v; want [2 3 4]", ids, err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"invalid tag", func() error { _, err := c.Next(ctx, "bad tag"); return err }, idgen.ErrInvalidTag},
		{"invalid count", func() error { _, err := c.NextN(ctx, "order", 0); return err }, idgen.ErrInvalidCount},
		{"count over the server's max", func() error { _, err := c.NextN(ctx, "order", 1_000_000); return err }, idgen.ErrInvalidCount},
	} {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// A refused tag reaches the server once escaped, so the error names the
// tag the caller passed, not its escaped form.
func TestClient_TagEscapedOnce(t *testing.T) {
	t.Parallel()
	ts := startServer(t, filepath.Join(t.TempDir(), "idgen.db"), server.Config{})
	ctx := context.Background()
	for _, tc := range []struct{ mode, tag string }{
		{"segment", "bad tag"},
		{"segment", "100%"},
		{"segment", "a?b"},
		{"segment", "caf\u00e9"},
		{"snowflake", "bad tag"},
	} {
		t.Run(tc.mode+" "+tc.tag, func(t *testing.T) {
			c, err := client.New(ts.URL, client.WithMode(tc.mode))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Next(ctx, tc.tag)
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Code != "invalid_tag" || !strings.Contains(ce.Message, strconv.Quote(tc.tag)) {
				t.Fatalf("Next(%q): err = %v, want invalid_tag naming %q", tc.tag, err, tc.tag)
			}
		})
	}
}

func TestClient_Auth(t *testing.T) {
	t.Parallel()
	toks, err := server.ParseAPITokens("client-token-00001=order")
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, filepath.Join(t.TempDir(), "idgen.db"), server.Config{APITokens: toks})
	ctx := context.Background()
	for _, tc := range []struct {
		name, token, tag string
		want             error
	}{
		{"no token", "", "order", client.ErrUnauthorized},
		{"wrong token", "client-token-00002", "order", client.ErrForbidden},
		{"other tag", "client-token-00001", "invoice", client.ErrForbidden},
		{"allowed", "client-token-00001", "order", nil},
	} {
		c, _ := client.New(ts.URL, client.WithToken(tc.token), client.WithMode("segment"))
		alloc, err := c.Segment(segment.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = alloc.Next(ctx, tc.tag)
		alloc.Close()
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// flaky answers 503 with Retry-After a given number of times before
// passing requests on.
type flaky struct {
	h        http.Handler
	failures atomic.Int64
	calls    atomic.Int64
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if f.failures.Add(-1) >= 0 {
		w.Header().Set("Retry-After", "0")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"store down"}}`))
		return
	}
	f.h.ServeHTTP(w, r)
}

func TestClient_RetriesUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := segmenttest.NewMemory()
	alloc, _ := segment.New(st, segment.Options{AutoCreate: true})
	defer alloc.Close()
	h, _ := server.New(server.Config{Segment: alloc, Ranges: alloc})
	f := &flaky{h: h}
	ts := httptest.NewServer(f)
	defer ts.Close()
	c, _ := client.New(ts.URL, client.WithMode("segment"), client.WithRetries(3), client.WithBackoff(time.Millisecond, 5*time.Millisecond))

	f.failures.Store(2) // two 503s, then success: the retries hide them
	if _, err := c.Next(ctx, "order"); err != nil {
		t.Fatalf("Next after two 503s: %v", err)
	}
	if n := f.calls.Load(); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
	f.failures.Store(10) // more than the retries: the caller learns why
	f.calls.Store(0)
	_, err := c.Next(ctx, "order")
	var apiErr *client.Error
	if !errors.Is(err, segment.ErrUnavailable) || !errors.As(err, &apiErr) || apiErr.Code != "unavailable" {
		t.Fatalf("err = %v, want ErrUnavailable with code unavailable", err)
	}
	if n := f.calls.Load(); n != 4 {
		t.Fatalf("%d calls, want 4 (1 + 3 retries)", n)
	}
	// A dead server is a network error, retried, then ErrUnavailable.
	dead, _ := client.New("http://127.0.0.1:1", client.WithRetries(1), client.WithBackoff(time.Millisecond, time.Millisecond))
	if _, err := dead.Next(ctx, "order"); !errors.Is(err, segment.ErrUnavailable) {
		t.Fatalf("dead server: err = %v, want ErrUnavailable", err)
	}
}

func TestNew_RejectsBadOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		opts []client.Option
	}{
		{"localhost:8080", nil},
		{"ftp://x", nil},
		{"http://x", []client.Option{client.WithMode("bogus")}},
		{"http://x", []client.Option{client.WithRetries(-1)}},
	} {
		if _, err := client.New(tc.url, tc.opts...); err == nil {
			t.Errorf("New(%q) accepted bad input", tc.url)
		}
	}
}

// counting passes requests on and counts them.
type counting struct {
	h     http.Handler
	calls atomic.Int64
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.calls.Add(1)
	c.h.ServeHTTP(w, r)
}

// 400, 401 and 403 cannot be cured by asking again: one request, the
// error at once, matchable with errors.Is, through both the per-ID calls
// and the range-caching allocator.
func TestClient_PermanentErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	toks, err := server.ParseAPITokens("client-token-00001=order;client-token-00003=*")
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, filepath.Join(t.TempDir(), "idgen.db"), server.Config{APITokens: toks})
	cnt := &counting{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Forward to the real server.
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, ts.URL+r.URL.RequestURI(), nil)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})}
	front := httptest.NewServer(cnt)
	defer front.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name, token, tag string
		want             error
	}{
		{"401", "", "order", client.ErrUnauthorized},
		{"403", "client-token-00002", "order", client.ErrForbidden},
		{"400", "client-token-00003", "bad tag", client.ErrBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := client.New(front.URL, client.WithToken(tc.token), client.WithMode("segment"),
				client.WithRetries(5), client.WithBackoff(time.Second, 2*time.Second))
			cnt.calls.Store(0)
			start := time.Now()
			_, err := c.Next(ctx, tc.tag)
			if !errors.Is(err, tc.want) || !errors.Is(err, segment.ErrRefused) || errors.Is(err, segment.ErrUnavailable) {
				t.Fatalf("Next: err = %v, want %v and not ErrUnavailable", err, tc.want)
			}
			// One request: a refusal is not retried, so no backoff was slept
			// (the time is reported, not judged: the machine may be loaded).
			if n := cnt.calls.Load(); n != 1 {
				t.Fatalf("Next: %d requests in %v, want 1 and no backoff", n, time.Since(start))
			}
			if tc.tag == "bad tag" {
				return // the allocator refuses an invalid tag before any request
			}
			alloc, err := c.Segment(segment.Options{MaxBackoff: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer alloc.Close()
			cnt.calls.Store(0)
			for range 5 {
				_, err := alloc.Next(ctx, tc.tag)
				if !errors.Is(err, tc.want) || errors.Is(err, segment.ErrUnavailable) {
					t.Fatalf("Segment Next: err = %v, want %v and not ErrUnavailable", err, tc.want)
				}
			}
			if n := cnt.calls.Load(); n != 1 {
				t.Fatalf("Segment: %d requests for 5 calls, want 1", n)
			}
		})
	}
}

func TestError_Is(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  *client.Error
		want []error
		not  []error
	}{
		{&client.Error{Status: 409, Code: "tag_limit_reached"}, []error{segment.ErrTagLimit, segment.ErrRefused, client.ErrBadRequest}, []error{segment.ErrUnavailable}},
		{&client.Error{Status: 400, Code: "invalid_tag"}, []error{idgen.ErrInvalidTag, client.ErrBadRequest, segment.ErrRefused}, []error{segment.ErrUnavailable}},
		{&client.Error{Status: 404, Code: "tag_not_found"}, []error{segment.ErrTagNotFound, client.ErrBadRequest}, []error{segment.ErrRefused}},
		{&client.Error{Status: 503, Code: "unavailable"}, []error{segment.ErrUnavailable}, []error{segment.ErrRefused, client.ErrServer}},
		{&client.Error{Status: 503, Code: "tag_exhausted"}, []error{segment.ErrExhausted}, []error{segment.ErrUnavailable}},
		{&client.Error{Status: 500, Code: "internal"}, []error{client.ErrServer}, []error{segment.ErrRefused}},
		{&client.Error{Status: 409, Code: "opaque_tag_range"}, []error{opaque.ErrRangeRefused, segment.ErrRefused}, []error{segment.ErrUnavailable}},
	} {
		for _, w := range tc.want {
			if !errors.Is(tc.err, w) {
				t.Errorf("%d %s does not match %v", tc.err.Status, tc.err.Code, w)
			}
		}
		for _, n := range tc.not {
			if errors.Is(tc.err, n) {
				t.Errorf("%d %s matches %v", tc.err.Status, tc.err.Code, n)
			}
		}
	}
}

// An opaque tag through the client: NextN gets encoded IDs, and the
// range-caching allocator gets a final, clear refusal instead of raw
// counters or a retry loop.
func TestClient_OpaqueTag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "idgen.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	key, err := opaque.ParseKey("000102030405060708090a0b0c0d0e0f")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1, Step: 100, Opaque: key.Fingerprint()}); err != nil {
		t.Fatal(err)
	}
	alloc, err := segment.New(st, segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alloc.Close() })
	gen := opaque.NewGenerator(alloc, st, key)
	h, err := server.New(server.Config{Segment: gen, Ranges: gen})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)

	c, err := client.New(ts.URL, client.WithMode("segment"))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.NextN(ctx, "order", 5)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if n, err := key.Decode("order", id); err != nil || n != int64(i+1) {
			t.Fatalf("ID %d decodes to %d, %v; want counter %d", id, n, err, i+1)
		}
	}
	cache, err := c.Segment(segment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cache.Close() }()
	if _, err := cache.Next(ctx, "order"); !errors.Is(err, opaque.ErrRangeRefused) || !errors.Is(err, segment.ErrRefused) {
		t.Fatalf("Segment().Next on an opaque tag: %v, want opaque.ErrRangeRefused", err)
	}
}

// A server with a smaller --max-range clamps the client's growing step,
// and the client caps its asks at what the server hands out, instead of
// stopping at a final 400 after its first segment (issue 19 item 6).
func TestClient_SegmentCapsStepAtServerMaxRange(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asks []int64
	ts := startServer(t, filepath.Join(t.TempDir(), "cap.db"), server.Config{MaxRange: 1500})
	target, _ := url.Parse(ts.URL)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, err := strconv.ParseInt(r.URL.Query().Get("size"), 10, 64); err == nil {
			mu.Lock()
			asks = append(asks, n)
			mu.Unlock()
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	c, err := client.New(proxy.URL, client.WithMode("segment"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Segment(segment.Options{}) // the step doubles while segments last under 15 minutes
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	var ids []int64
	for len(ids) < 20_000 {
		got, err := a.NextN(ctx, "capped", 500)
		if err != nil {
			t.Fatalf("after %d IDs: %v", len(ids), err)
		}
		ids = append(ids, got...)
	}
	if d := segmenttest.Duplicates(ids); d != 0 {
		t.Fatalf("%d duplicates", d)
	}
	mu.Lock()
	defer mu.Unlock()
	over := 0
	for _, n := range asks {
		if n > 1500 {
			over++
		}
	}
	// One ask may pass the cap: the one whose answer taught it.
	if over > 1 || len(asks) < 10 {
		t.Fatalf("%d asks, %d of them above the server's 1500: %v", len(asks), over, asks)
	}
}
