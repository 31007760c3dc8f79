package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/idgentest"
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
