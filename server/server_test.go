package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/store/sqlite"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	m.Run()
}

// openStore opens a migrated SQLite store in a temporary folder.
func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "idgen.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return st
}

// newAllocator returns an allocator over st, closed when the test ends.
func newAllocator(t testing.TB, st segment.Store, opts segment.Options) *segment.Allocator {
	t.Helper()
	alloc, err := segment.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alloc.Close() })
	return alloc
}

// newServer serves a segment allocator on a real SQLite file.
func newServer(t *testing.T, cfg server.Config) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	st := openStore(t)
	if err := st.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1001, Step: 100}); err != nil {
		t.Fatal(err)
	}
	alloc := newAllocator(t, st, segment.Options{AutoCreate: false})
	cfg.Segment = alloc
	if cfg.Ready == nil {
		cfg.Ready = st.Ping
	}
	h, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

type answer struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, method, url string, header map[string]string) answer {
	t.Helper()
	var hdr []string
	for k, v := range header {
		hdr = append(hdr, k, v)
	}
	return do(t, method, url, "", "", hdr...)
}

func TestServer_IDs(t *testing.T) {
	t.Parallel()
	ts := newServer(t, server.Config{MaxBatch: 50})
	for _, tc := range []struct {
		name, method, path, accept string
		status                     int
		body                       string // exact body, or for errors the code
	}{
		{"one", "GET", "/id/order", "", 200, `{"tag":"order","id":"1001"}` + "\n"},
		{"explicit segment", "GET", "/segment/order", "", 200, `{"tag":"order","id":"1002"}` + "\n"},
		{"batch", "GET", "/id/order?count=3", "", 200, `{"tag":"order","ids":["1003","1004","1005"]}` + "\n"},
		{"text", "GET", "/id/order", "text/plain", 200, "1006"},
		{"text batch", "GET", "/id/order?count=2", "text/plain", 200, "1007\n1008\n"},
		{"unknown tag", "GET", "/id/nosuch", "", 404, "tag_not_found"},
		{"bad tag", "GET", "/id/a%20b", "", 400, "invalid_tag"},
		{"too long tag", "GET", "/id/" + strings.Repeat("x", 65), "", 400, "invalid_tag"},
		{"unicode tag", "GET", "/id/%C3%BC", "", 400, "invalid_tag"},
		{"count zero", "GET", "/id/order?count=0", "", 400, "invalid_count"},
		{"count negative", "GET", "/id/order?count=-5", "", 400, "invalid_count"},
		{"count over max", "GET", "/id/order?count=51", "", 400, "invalid_count"},
		{"count huge", "GET", "/id/order?count=99999999999999999999", "", 400, "invalid_count"},
		{"count text", "GET", "/id/order?count=abc", "", 400, "invalid_count"},
		{"count empty", "GET", "/id/order?count=", "", 400, "invalid_count"},
		{"count repeated", "GET", "/id/order?count=1&count=2", "", 400, "invalid_count"},
		{"snowflake off", "GET", "/snowflake/order", "", 404, "mode_disabled"},
		{"wrong method", "POST", "/id/order", "", 405, "method_not_allowed"},
		{"unknown route", "GET", "/nope", "", 404, "not_found"},
		{"traversal", "GET", "/id/../../etc/passwd", "", 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.accept != "" {
				h["Accept"] = tc.accept
			}
			a := get(t, tc.method, ts.URL+tc.path, h)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d; body %s", a.status, tc.status, a.body)
			}
			if tc.status == 200 {
				if a.body != tc.body {
					t.Fatalf("body %q, want %q", a.body, tc.body)
				}
				return
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(a.body), &e); err != nil {
				t.Fatalf("error body %q is not JSON: %v", a.body, err)
			}
			if e.Error.Code != tc.body || e.Error.Message == "" {
				t.Fatalf("error %+v, want code %q and a message", e.Error, tc.body)
			}
			if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("Content-Type %q, want JSON", ct)
			}
		})
	}
}

// failing is a generator whose store is down.
type failing struct{}

func (failing) Next(context.Context, string) (int64, error) {
	return 0, errors.Join(segment.ErrUnavailable, errors.New("dial tcp: connection refused"))
}
func (f failing) NextN(ctx context.Context, tag string, _ int) ([]int64, error) {
	_, err := f.Next(ctx, tag)
	return nil, err
}

type panicking struct{ failing }

func (panicking) Next(context.Context, string) (int64, error) { panic("boom") }

func TestServer_UnavailableAndPanics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		gen    server.Config
		status int
		code   string
	}{
		{"store down", server.Config{Segment: failing{}}, 503, "unavailable"},
		{"panic", server.Config{Segment: panicking{}}, 500, "internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := server.New(tc.gen)
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(h)
			defer ts.Close()
			a := get(t, "GET", ts.URL+"/id/order", nil)
			if a.status != tc.status || !strings.Contains(a.body, `"code":"`+tc.code+`"`) {
				t.Fatalf("got %d %s, want %d %s", a.status, a.body, tc.status, tc.code)
			}
			if strings.Contains(a.body, "goroutine") || strings.Contains(a.body, "boom") {
				t.Fatalf("response leaks internals: %s", a.body)
			}
			if tc.status == 503 && a.header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
		})
	}
}

func TestServer_Health(t *testing.T) {
	t.Parallel()
	down := errors.New("store unreachable")
	for _, tc := range []struct {
		name  string
		ready error
		want  int
	}{{"ready", nil, 200}, {"not ready", down, 503}} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newServer(t, server.Config{Ready: func(context.Context) error { return tc.ready }})
			if a := get(t, "GET", ts.URL+"/healthz", nil); a.status != 200 {
				t.Fatalf("/healthz = %d", a.status)
			}
			if a := get(t, "GET", ts.URL+"/readyz", nil); a.status != tc.want {
				t.Fatalf("/readyz = %d, want %d", a.status, tc.want)
			}
		})
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []server.Config{
		{},
		{Segment: failing{}, Mode: "bogus"},
		{Segment: failing{}, Mode: server.ModeSnowflake},
		{Segment: failing{}, MaxBatch: -1},
	} {
		if _, err := server.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad config", cfg)
		}
	}
}
