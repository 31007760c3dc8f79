package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

// newAdminServer serves a real SQLite store with the admin API, client
// tokens and metrics on.
func newAdminServer(t *testing.T, adminToken string, api server.APITokens) *httptest.Server {
	t.Helper()
	st := openStore(t)
	m := server.NewMetrics()
	alloc := newAllocator(t, st, segment.Options{AutoCreate: true, Observer: m})
	h, err := server.New(server.Config{Segment: alloc, Admin: st, Stats: alloc, AdminToken: adminToken, APITokens: api, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

func do(t *testing.T, method, url, token, body string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func errCode(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" {
		t.Fatalf("not an error body: %q", body)
	}
	return e.Error.Code
}

func TestAdmin_Auth(t *testing.T) {
	t.Parallel()
	open := newAdminServer(t, "", nil)
	guarded := newAdminServer(t, "s3cret-admin-token", nil)
	for _, tc := range []struct {
		name   string
		url    string
		token  string
		status int
		code   string
		says   string
	}{
		{"no admin token configured", open.URL, "anything", 403, "admin_disabled", "--admin-token"},
		{"missing token", guarded.URL, "", 401, "unauthorized", "Bearer"},
		// A wrong admin token is no question of tags.
		{"wrong token", guarded.URL, "s3cret-admiN", 403, "forbidden", "not this server's admin token (--admin-token"},
		{"right token", guarded.URL, "s3cret-admin-token", 200, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, "GET", tc.url+"/admin/tags", tc.token, "")
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			if tc.code != "" && errCode(t, a.body) != tc.code {
				t.Fatalf("code %s, want %s", errCode(t, a.body), tc.code)
			}
			if !strings.Contains(a.body, tc.says) || strings.Contains(a.body, "tag") && tc.code == "forbidden" {
				t.Fatalf("body %s, want a message saying %q and nothing of tags", a.body, tc.says)
			}
		})
	}
}

// On a store whose tag floor is raised (a fence, or bump --all), a new
// tag starts above the start asked for, and the answer says where.
func TestAdmin_CreateAnswersTheStoredStart(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	if _, err := st.BumpAll(context.Background(), 5000); err != nil {
		t.Fatal(err)
	}
	h, err := server.New(server.Config{Admin: st, AdminToken: "floor-admin-token", Segment: newAllocator(t, st, segment.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	a := do(t, "POST", ts.URL+"/admin/tags", "floor-admin-token", `{"tag":"late","start":10}`, "Content-Type", "application/json")
	if a.status != 201 || !strings.Contains(a.body, `"next_id":"5010"`) {
		t.Fatalf("create after the floor rose by 5000: %d %s; want next_id 5010", a.status, a.body)
	}
	if a := do(t, "GET", ts.URL+"/id/late", "", ""); !strings.Contains(a.body, `"id":"5010"`) {
		t.Fatalf("first ID: %s; want 5010, as the create answer said", a.body)
	}
}

func TestAdmin_Tags(t *testing.T) {
	t.Parallel()
	ts := newAdminServer(t, "tok-admin-token-1", nil)
	const tok = "tok-admin-token-1"
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string // substring of the body, or error code
	}{
		{"create", "POST", "/admin/tags", `{"tag":"order","step":500,"start":1000,"description":"orders"}`, 201, `"next_id":"1000"`},
		{"create again", "POST", "/admin/tags", `{"tag":"order","step":500}`, 409, "tag_exists"},
		{"bad tag", "POST", "/admin/tags", `{"tag":"no way","step":5}`, 400, "invalid_tag"},
		{"bad step", "POST", "/admin/tags", `{"tag":"x","step":0}`, 400, "invalid_step"},
		{"unknown field", "POST", "/admin/tags", `{"tag":"x","stepp":5}`, 400, "invalid_body"},
		{"not json", "POST", "/admin/tags", `tag=x`, 400, "invalid_body"},
		{"trailing data", "POST", "/admin/tags", `{"tag":"y"} {}`, 400, "invalid_body"},
		{"huge body", "POST", "/admin/tags", `{"tag":"x","description":"` + strings.Repeat("a", 20000) + `"}`, 400, "invalid_body"},
		{"patch", "PATCH", "/admin/tags/order", `{"step":800}`, 200, `"step":800`},
		{"patch unknown", "PATCH", "/admin/tags/ghost", `{"step":800}`, 404, "tag_not_found"},
		{"patch no step", "PATCH", "/admin/tags/order", `{}`, 400, "invalid_body"},
		{"patch bad step", "PATCH", "/admin/tags/order", `{"step":-1}`, 400, "invalid_step"},
		{"list", "GET", "/admin/tags", "", 200, `"step":800`},
		{"wrong method", "DELETE", "/admin/tags", "", 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, tc.method, ts.URL+tc.path, tok, tc.body, "Content-Type", "application/json")
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			if a.status >= 400 {
				if c := errCode(t, a.body); c != tc.want {
					t.Fatalf("code %s, want %s", c, tc.want)
				}
				if tc.method == "PATCH" && strings.Contains(a.body, "auto-create") {
					t.Fatalf("PATCH answer suggests auto-create, which never applies to it: %s", a.body)
				}
			} else if !strings.Contains(a.body, tc.want) {
				t.Fatalf("body %s lacks %s", a.body, tc.want)
			}
		})
	}
	// The created tag serves from its start, and the segments view shows it.
	if a := do(t, "GET", ts.URL+"/id/order", "", ""); !strings.Contains(a.body, `"id":"1000"`) {
		t.Fatalf("first ID of the created tag: %s", a.body)
	}
	a := do(t, "GET", ts.URL+"/admin/segments", tok, "")
	var seg struct {
		Mode     string
		Segments []struct {
			Tag     string
			Active  string
			Buffers struct {
				Current *struct{ Start, End, Pos string }
			}
			Step int64
		}
	}
	if err := json.Unmarshal([]byte(a.body), &seg); err != nil || len(seg.Segments) != 1 {
		t.Fatalf("/admin/segments = %s (%v)", a.body, err)
	}
	s := seg.Segments[0]
	if s.Tag != "order" || s.Active != "current" || s.Buffers.Current == nil || s.Buffers.Current.Start != "1000" || s.Buffers.Current.Pos != "1001" || s.Step != 800 {
		t.Fatalf("segment view %+v, want order [1000, 1800) at 1001", s)
	}
}

func TestAPITokens(t *testing.T) {
	t.Parallel()
	toks, err := server.ParseAPITokens("# clients\nshop-token-00001=order,invoice;ops-token-000002=*")
	if err != nil {
		t.Fatal(err)
	}
	ts := newAdminServer(t, "", toks)
	for _, tc := range []struct {
		name, path, token string
		status            int
	}{
		{"no token", "/id/order", "", 401},
		{"unknown token", "/id/order", "nope-nope-nope", 403},
		{"allowed tag", "/id/order", "shop-token-00001", 200},
		{"other tag", "/id/user", "shop-token-00001", 403},
		{"wildcard", "/segment/user", "ops-token-000002", 200},
		{"health is open", "/healthz", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if a := do(t, "GET", ts.URL+tc.path, tc.token, ""); a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
		})
	}
	for _, bad := range []string{"short=*", "no-equals-sign", "longenough="} {
		if _, err := server.ParseAPITokens(bad); err == nil {
			t.Errorf("ParseAPITokens(%q) accepted a bad entry", bad)
		}
	}
}

func TestMetricsAndRequestID(t *testing.T) {
	t.Parallel()
	ts := newAdminServer(t, "", nil)
	a := do(t, "GET", ts.URL+"/id/order?count=5", "", "", "X-Request-ID", "req-42")
	if a.header.Get("X-Request-ID") != "req-42" {
		t.Fatalf("X-Request-ID not echoed: %q", a.header.Get("X-Request-ID"))
	}
	if a := do(t, "GET", ts.URL+"/healthz", "", ""); len(a.header.Get("X-Request-ID")) != 16 {
		t.Fatalf("no generated request ID: %q", a.header.Get("X-Request-ID"))
	}
	m := do(t, "GET", ts.URL+"/metrics", "", "")
	for _, want := range []string{
		`idgen_ids_issued_total{mode="segment",tag="order"} 5`,
		`idgen_segment_loads_total{result="ok",tag="order"} 1`,
		`idgen_segment_load_seconds_count 1`,
		`idgen_segment_reserved_ids_total{tag="order"} `,
		`idgen_http_request_duration_seconds_count{code="200",method="GET",route="/id/:tag"} 1`,
		`idgen_clock_backward_events_total 0`,
		`idgen_worker_lease_held 0`,
	} {
		if !strings.Contains(m.body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// newFullServer is the server with every feature on, as `idgen serve`
// wires it.
func newFullServer(t *testing.T) *server.Server {
	t.Helper()
	st := openStore(t)
	m := server.NewMetrics()
	alloc := newAllocator(t, st, segment.Options{AutoCreate: true, Observer: m})
	h, err := server.New(server.Config{Segment: alloc, Admin: st, Stats: alloc, Ranges: alloc, MaxRange: 5000, AdminToken: "admin-token-0001", Metrics: m, Ready: st.Ping,
		Compat: server.Compat{Leaf: true, TinyID: true}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func newFullHTTPServer(t *testing.T) *httptest.Server {
	ts := httptest.NewServer(newFullServer(t))
	t.Cleanup(ts.Close)
	return ts
}
