package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

// Every body a tag definition can carry gets a 400 that names what is
// wrong, never a 500 from the database (issue 19 items 1 and 20).
func TestAdmin_BodyErrorsNameTheField(t *testing.T) {
	t.Parallel()
	const admin = "an-admin-token-of-length"
	ts := newAdminServer(t, admin, nil)
	for _, tc := range []struct {
		name, body, code, want string
	}{
		{"NUL in description", `{"tag":"t7","description":"a\u0000b"}`, "invalid_description", "description holds a NUL character"},
		{"description too long", `{"tag":"t9","description":"` + strings.Repeat("é", 257) + `"}`, "invalid_description", "description is limited to 256 characters, got 257"},
		{"unknown field", `{"tag":"t10","stepp":5}`, "invalid_body", `unknown field "stepp"`},
		{"wrong type", `{"tag":"t11","step":"5"}`, "invalid_body", `"step" must be a JSON number, not a string`},
		{"two objects", `{"tag":"t12"}{"tag":"t13"}`, "invalid_body", "one JSON object only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, http.MethodPost, ts.URL+"/admin/tags", admin, tc.body)
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(a.body), &e); err != nil || a.status != http.StatusBadRequest ||
				e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.want) {
				t.Fatalf("POST %s = %d %s; want 400 %s saying %q", tc.body, a.status, a.body, tc.code, tc.want)
			}
		})
	}
	// 256 characters of four bytes each fit: the limit is in characters.
	if a := do(t, http.MethodPost, ts.URL+"/admin/tags", admin, `{"tag":"emoji","description":"`+strings.Repeat("😀", 256)+`"}`); a.status != http.StatusCreated {
		t.Fatalf("256 emoji = %d %s, want 201", a.status, a.body)
	}
}

// JSON answers end with a newline, and their messages are not
// HTML-escaped: "Bearer <token>", not "Bearer \u003ctoken\u003e".
func TestJSON_NewlineAndNoHTMLEscaping(t *testing.T) {
	t.Parallel()
	const admin = "an-admin-token-of-length"
	ts := newAdminServer(t, admin, nil)
	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{"/admin/tags", "", http.StatusUnauthorized},
		{"/admin/tags", admin, http.StatusOK},
		{"/id/order", "", http.StatusOK},
		{"/id/order?count=2", "", http.StatusOK},
		{"/healthz", "", http.StatusOK},
		{"/nope", "", http.StatusNotFound},
	} {
		a := do(t, http.MethodGet, ts.URL+tc.path, tc.token, "")
		if a.status != tc.status || !strings.HasSuffix(a.body, "}\n") || strings.Contains(a.body, `\u003c`) {
			t.Errorf("GET %s = %d %q; want %d, a body ending in a newline, without \\u003c", tc.path, a.status, a.body, tc.status)
		}
		if tc.status == http.StatusUnauthorized && !strings.Contains(a.body, "Bearer <token>") {
			t.Errorf("GET %s = %q; want the message to say Bearer <token>", tc.path, a.body)
		}
	}
}

// Without an admin token the monitoring page could show nothing: /ui
// answers 404 and says which flag turns it on.
func TestUI_OffWithoutAdminToken(t *testing.T) {
	t.Parallel()
	ts := newAdminServer(t, "", nil)
	for _, path := range []string{"/ui", "/ui/", "/ui/app.js"} {
		a := do(t, http.MethodGet, ts.URL+path, "", "")
		if a.status != http.StatusNotFound || errCode(t, a.body) != "ui_disabled" || !strings.Contains(a.body, "--admin-token") {
			t.Errorf("GET %s without --admin-token = %d %s; want 404 ui_disabled naming --admin-token", path, a.status, a.body)
		}
	}
	on := newAdminServer(t, "an-admin-token-of-length", nil)
	if a := do(t, http.MethodGet, on.URL+"/ui", "", ""); a.status != http.StatusOK {
		t.Errorf("GET /ui with --admin-token = %d, want 200", a.status)
	}
}

// failingStore is a store whose every reservation fails with a driver's
// text, as a database that refuses the password would.
type failingStore struct{}

func (failingStore) Reserve(context.Context, string, int64) (segment.Range, error) {
	return segment.Range{}, errors.New("pq: password authentication failed for user \"idgen_prod\" at 10.1.2.3")
}
func (failingStore) CreateTag(context.Context, segment.Tag) error { return nil }

// /admin/segments shows a load's failure as a code and a fixed message;
// the driver's text goes to the log under the request ID (item 11).
func TestAdminSegments_LastErrorHasNoDriverText(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	alloc, err := segment.New(failingStore{}, segment.Options{AutoCreate: true, WaitTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alloc.Close() })
	const admin = "an-admin-token-of-length"
	h, err := server.New(server.Config{Segment: alloc, Stats: alloc, AdminToken: admin,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	if a := do(t, http.MethodGet, ts.URL+"/id/order", "", ""); a.status != http.StatusServiceUnavailable {
		t.Fatalf("GET /id/order on a failing store = %d, want 503", a.status)
	}
	a := do(t, http.MethodGet, ts.URL+"/admin/segments", admin, "")
	var out struct {
		Segments []struct {
			Tag       string `json:"tag"`
			LastError string `json:"last_error"`
		} `json:"segments"`
	}
	if err := json.Unmarshal([]byte(a.body), &out); err != nil || len(out.Segments) != 1 {
		t.Fatalf("/admin/segments = %d %s", a.status, a.body)
	}
	rid := a.header.Get("X-Request-ID")
	got := out.Segments[0].LastError
	if strings.Contains(a.body, "password") || strings.Contains(a.body, "10.1.2.3") ||
		!strings.HasPrefix(got, "unavailable: ") || !strings.Contains(got, rid) {
		t.Fatalf("last_error %q (request %s); want the code, a fixed message and the request ID, no driver text", got, rid)
	}
	if l := logs.String(); !strings.Contains(l, "request_id="+rid) || !strings.Contains(l, "password authentication failed") {
		t.Fatalf("the log lacks the cause under request ID %s:\n%s", rid, l)
	}
}
