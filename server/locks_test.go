package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/idgentest"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/store/sqlite"
)

// lockAPI calls the /locks routes of one server.
type lockAPI struct {
	t     *testing.T
	base  string
	token string
}

type lockAnswer struct {
	status int
	body   map[string]any
	raw    string
}

// code is the error code of an error answer.
func (a lockAnswer) code() string {
	e, _ := a.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (a lockAnswer) str(k string) string { s, _ := a.body[k].(string); return s }

func (l lockAPI) call(method, path, body string) lockAnswer {
	l.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, l.base+path, rd)
	if err != nil {
		l.t.Fatal(err)
	}
	if l.token != "" {
		req.Header.Set("Authorization", "Bearer "+l.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := lockAnswer{status: resp.StatusCode, raw: string(b)}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &a.body); err != nil {
			l.t.Fatalf("%s %s: answer %q is no JSON object: %v", method, path, b, err)
		}
	}
	if bytes.Contains(b, []byte("goroutine ")) {
		l.t.Fatalf("%s %s: a stack trace in the answer: %s", method, path, b)
	}
	return a
}

func (l lockAPI) acquire(name, owner, ttl, wait string) lockAnswer {
	l.t.Helper()
	b, _ := json.Marshal(map[string]string{"owner": owner, "ttl": ttl, "wait": wait})
	return l.call(http.MethodPost, "/locks/"+url.PathEscape(name), string(b))
}

func (l lockAPI) release(name, owner, token string) lockAnswer {
	l.t.Helper()
	return l.call(http.MethodDelete, "/locks/"+url.PathEscape(name)+"?"+url.Values{"owner": {owner}, "token": {token}}.Encode(), "")
}

// The sequence over HTTP: a's grant, b refused without a wait,
// a's release, b's grant with a greater token, and a's old token
// refused without touching b's grant.
func TestLocks_HTTP_HandOverAndStaleRelease(t *testing.T) {
	t.Parallel()
	srv := idgentest.NewServer(t, &idgentest.Options{AdminToken: "admin-token-0123456789"})
	api := lockAPI{t: t, base: srv.URL}

	a := api.acquire("order:42", "a", "10s", "")
	if a.status != 200 || a.str("name") != "order:42" || a.str("owner") != "a" || a.str("expires_at") == "" {
		t.Fatalf("acquire a: %d %s", a.status, a.raw)
	}
	aTok, err := strconv.ParseInt(a.str("token"), 10, 64)
	if err != nil {
		t.Fatalf("token %q is not a decimal string: %s", a.raw, err)
	}
	held := api.acquire("order:42", "b", "10s", "")
	if held.status != 409 || held.code() != "lock_held" || strings.Contains(held.raw, `"a"`) {
		t.Fatalf("acquire b: %d %s; want 409 lock_held without the holder's owner", held.status, held.raw)
	}
	admin := lockAPI{t: t, base: srv.URL, token: srv.AdminToken()}
	if h := admin.acquire("order:42", "b", "10s", ""); h.status != 409 || !strings.Contains(h.raw, `"owner":"a"`) {
		t.Fatalf("acquire b as admin: %d %s; want 409 naming owner a", h.status, h.raw)
	}
	if r := api.release("order:42", "a", a.str("token")); r.status != 204 {
		t.Fatalf("release a: %d %s", r.status, r.raw)
	}
	b := api.acquire("order:42", "b", "10s", "")
	bTok, _ := strconv.ParseInt(b.str("token"), 10, 64)
	if b.status != 200 || bTok <= aTok {
		t.Fatalf("acquire b: %d %s; want a token above %d", b.status, b.raw, aTok)
	}
	if r := api.release("order:42", "a", a.str("token")); r.status != 409 || r.code() != "lock_not_held" {
		t.Fatalf("release with a's old token: %d %s; want 409 lock_not_held", r.status, r.raw)
	}
	d := admin.call(http.MethodGet, "/locks/order:42", "")
	h, _ := d.body["holder"].(map[string]any)
	if d.status != 200 || h["owner"] != "b" || h["token"] != b.str("token") {
		t.Fatalf("describe: %d %s; want b holding token %d", d.status, d.raw, bTok)
	}
	l := admin.call(http.MethodGet, "/admin/locks", "")
	if l.status != 200 || !strings.Contains(l.raw, `"name":"order:42"`) {
		t.Fatalf("/admin/locks: %d %s", l.status, l.raw)
	}
	if r := api.call(http.MethodPost, "/locks/order:42/renew", `{"owner":"a","token":"`+a.str("token")+`","ttl":"10s"}`); r.status != 409 || r.code() != "lock_lost" {
		t.Fatalf("renew a's old grant: %d %s; want 409 lock_lost", r.status, r.raw)
	}
	if r := api.call(http.MethodPost, "/locks/order:42/renew", `{"owner":"b","token":"`+b.str("token")+`","ttl":"20s"}`); r.status != 200 || r.str("token") != b.str("token") {
		t.Fatalf("renew b: %d %s", r.status, r.raw)
	}
}

// Every refusal of a bad request has its own 400 code, and none is a 5xx.
func TestLocks_HTTP_BadRequests(t *testing.T) {
	t.Parallel()
	srv := idgentest.NewServer(t, nil)
	api := lockAPI{t: t, base: srv.URL}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"name with a control character", "POST", "/locks/a%01b", `{"owner":"a","ttl":"10s"}`, 400, "invalid_lock_name"},
		{"name too long", "POST", "/locks/" + strings.Repeat("n", 201), `{"owner":"a","ttl":"10s"}`, 400, "invalid_lock_name"},
		{"empty owner", "POST", "/locks/x", `{"owner":"","ttl":"10s"}`, 400, "invalid_lock_owner"},
		{"no owner", "POST", "/locks/x", `{"ttl":"10s"}`, 400, "invalid_lock_owner"},
		{"TTL below the bounds", "POST", "/locks/x", `{"owner":"a","ttl":"10ms"}`, 400, "invalid_lock_ttl"},
		{"TTL above the bounds", "POST", "/locks/x", `{"owner":"a","ttl":"11m"}`, 400, "invalid_lock_ttl"},
		{"TTL no duration", "POST", "/locks/x", `{"owner":"a","ttl":"ten"}`, 400, "invalid_lock_ttl"},
		{"negative wait", "POST", "/locks/x", `{"owner":"a","ttl":"10s","wait":"-1s"}`, 400, "invalid_lock_wait"},
		{"wait no duration", "POST", "/locks/x", `{"owner":"a","ttl":"10s","wait":"soon"}`, 400, "invalid_lock_wait"},
		{"unknown field", "POST", "/locks/x", `{"owner":"a","ttl":"10s","lease":1}`, 400, "invalid_body"},
		{"not JSON", "POST", "/locks/x", `owner=a`, 400, "invalid_body"},
		{"numeric token", "POST", "/locks/x/renew", `{"owner":"a","token":1,"ttl":"10s"}`, 400, "invalid_body"},
		{"token not decimal", "POST", "/locks/x/renew", `{"owner":"a","token":"x","ttl":"10s"}`, 400, "invalid_lock_token"},
		{"release without token", "DELETE", "/locks/x?owner=a", "", 400, "invalid_lock_token"},
		{"release without owner", "DELETE", "/locks/x?token=1", "", 400, "invalid_lock_owner"},
		{"release of a free lock", "DELETE", "/locks/free?owner=a&token=1", "", 409, "lock_not_held"},
		{"admin list without a token", "GET", "/admin/locks", "", 403, "admin_disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api.t = t
			a := api.call(tc.method, tc.path, tc.body)
			if a.status != tc.status || a.code() != tc.code {
				t.Fatalf("%s %s: %d %s; want %d %s", tc.method, tc.path, a.status, a.raw, tc.status, tc.code)
			}
		})
	}
}

// A waiter gets the lock once its holder stops renewing, within the
// holder's TTL and its own wait.
func TestLocks_HTTP_WaiterGetsLapsedLock(t *testing.T) {
	t.Parallel()
	srv := idgentest.NewServer(t, &idgentest.Options{LockMinTTL: 50 * time.Millisecond})
	api := lockAPI{t: t, base: srv.URL}
	a := api.acquire("job", "a", "200ms", "")
	if a.status != 200 {
		t.Fatalf("acquire a: %d %s", a.status, a.raw)
	}
	b := api.acquire("job", "b", "10s", "5s")
	if b.status != 200 || b.str("owner") != "b" {
		t.Fatalf("b waiting for a's lapse: %d %s", b.status, b.raw)
	}
	if a.str("token") == b.str("token") {
		t.Fatalf("b got a's token %s", a.str("token"))
	}
}

// lockServer serves cfg's lock API, with cfg.Backend a fresh SQLite
// store's unless set, beside an allocator.
func lockServer(t *testing.T, cfg server.LockConfig) string {
	t.Helper()
	return lockServerWith(t, server.Config{}, cfg)
}

// lockServerWith is lockServer with base's other settings.
func lockServerWith(t *testing.T, base server.Config, cfg server.LockConfig) string {
	t.Helper()
	if cfg.Backend == nil {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "locks.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		if _, err := st.Migrate(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		cfg.Backend = st.Locks()
	}
	base.Segment, base.Locks, base.AdminToken = idgentest.NewAllocator(t), cfg, "admin-token-0123456789"
	s, err := server.New(base)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts.URL
}

// With API tokens, a lock call needs a token whose tags name the lock,
// as an ID call does for its tag; the admin token is let in too, and
// only it sees other owners.
func TestLocks_HTTP_Auth(t *testing.T) {
	t.Parallel()
	toks, err := server.ParseAPITokens("orders-token-0123456789=order:1;all-token-0123456789=*")
	if err != nil {
		t.Fatal(err)
	}
	base := lockServerWith(t, server.Config{APITokens: toks}, server.LockConfig{})
	for _, tc := range []struct {
		name, token, lock string
		status            int
		code              string
	}{
		{"no token", "", "order:1", 401, "unauthorized"},
		{"wrong token", "nobody-token-0123456789", "order:1", 403, "forbidden"},
		{"token for another lock", "orders-token-0123456789", "order:2", 403, "forbidden"},
		{"token for the lock", "orders-token-0123456789", "order:1", 200, ""},
		{"token for every lock", "all-token-0123456789", "order:3", 200, ""},
		{"admin token", "admin-token-0123456789", "order:4", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := lockAPI{t: t, base: base, token: tc.token}.acquire(tc.lock, "o", "10s", "")
			if a.status != tc.status || a.code() != tc.code {
				t.Fatalf("%d %s; want %d %s", a.status, a.raw, tc.status, tc.code)
			}
		})
	}
	d := lockAPI{t: t, base: base, token: "all-token-0123456789"}.call(http.MethodGet, "/locks/order:1", "")
	if h, _ := d.body["holder"].(map[string]any); d.status != 200 || h == nil || h["owner"] != nil {
		t.Fatalf("describe with a client token: %d %s; want the holder without its owner", d.status, d.raw)
	}
	d = lockAPI{t: t, base: base, token: "admin-token-0123456789"}.call(http.MethodGet, "/locks/order:1", "")
	if h, _ := d.body["holder"].(map[string]any); d.status != 200 || h == nil || h["owner"] != "o" {
		t.Fatalf("describe with the admin token: %d %s; want the holder's owner", d.status, d.raw)
	}
}

// downLocks is a lock store that cannot be reached.
type downLocks struct{}

var errDown = errors.New("dial tcp 10.1.2.3:5432: connection refused")

func (downLocks) Acquire(context.Context, string, string, time.Duration, bool) (lock.Grant, error) {
	return lock.Grant{}, errDown
}
func (downLocks) Renew(context.Context, lock.Grant, time.Duration) (lock.Grant, error) {
	return lock.Grant{}, errDown
}
func (downLocks) Release(context.Context, lock.Grant) error           { return errDown }
func (downLocks) Describe(context.Context, string) (lock.Info, error) { return lock.Info{}, errDown }

// The answers that depend on the server's configuration: no lock store,
// a store that is down (503 with Retry-After, never its text), a full
// table of names, and a wait cut to the server's maximum.
func TestLocks_HTTP_ServerLimits(t *testing.T) {
	t.Parallel()
	t.Run("no lock store", func(t *testing.T) {
		s, err := server.New(server.Config{Segment: idgentest.NewAllocator(t)})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s)
		defer ts.Close()
		api := lockAPI{t: t, base: ts.URL}
		if a := api.acquire("x", "a", "10s", ""); a.status != 404 || a.code() != "locks_disabled" {
			t.Fatalf("acquire: %d %s; want 404 locks_disabled", a.status, a.raw)
		}
	})
	t.Run("store down", func(t *testing.T) {
		api := lockAPI{t: t, base: lockServer(t, server.LockConfig{Backend: downLocks{}})}
		for _, a := range []lockAnswer{
			api.acquire("x", "a", "10s", ""),
			api.release("x", "a", "1"),
			api.call(http.MethodGet, "/locks/x", ""),
		} {
			if a.status != 503 || a.code() != "unavailable" || strings.Contains(a.raw, "10.1.2.3") {
				t.Fatalf("%d %s; want 503 unavailable without the store's text", a.status, a.raw)
			}
		}
	})
	t.Run("table of names full", func(t *testing.T) {
		api := lockAPI{t: t, base: lockServer(t, server.LockConfig{MaxNames: 2})}
		for _, n := range []string{"a", "b"} {
			if a := api.acquire(n, "o", "10s", ""); a.status != 200 {
				t.Fatalf("acquire %s: %d %s", n, a.status, a.raw)
			}
		}
		if a := api.acquire("c", "o", "10s", ""); a.status != 409 || a.code() != "lock_limit_reached" {
			t.Fatalf("a third name: %d %s; want 409 lock_limit_reached", a.status, a.raw)
		}
		if a := api.acquire("a", "o", "10s", ""); a.status != 200 {
			t.Fatalf("a known name: %d %s", a.status, a.raw)
		}
	})
	t.Run("wait cut to the maximum", func(t *testing.T) {
		api := lockAPI{t: t, base: lockServer(t, server.LockConfig{MaxWait: 50 * time.Millisecond})}
		if a := api.acquire("x", "a", "10s", ""); a.status != 200 {
			t.Fatalf("acquire a: %d %s", a.status, a.raw)
		}
		start := time.Now()
		if b := api.acquire("x", "b", "10s", "1h"); b.status != 409 || b.code() != "lock_held" {
			t.Fatalf("b waiting an hour: %d %s; want 409 lock_held after the server's maximum", b.status, b.raw)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("b's wait lasted %v; the server's maximum is 50ms", d)
		}
	})
}

// A config the lock package cannot use is refused by New.
func TestLocks_InvalidConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []server.LockConfig{
		{Backend: downLocks{}, MinTTL: time.Millisecond},
		{Backend: downLocks{}, MinTTL: time.Minute, MaxTTL: time.Second},
		{Backend: downLocks{}, MaxWait: time.Hour},
		{Backend: downLocks{}, MaxWait: -time.Second},
		{Backend: downLocks{}, MaxNames: -1},
	} {
		if _, err := server.New(server.Config{Segment: idgentest.NewAllocator(t), Locks: cfg}); !errors.Is(err, server.ErrInvalidConfig) {
			t.Errorf("New with %+v: %v; want server.ErrInvalidConfig", cfg, err)
		}
	}
}
