//go:build unix

package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

const uiToken = "t0ken-of-the-ui-test"

// uiTags are created, and IDs issued from them, before the page loads;
// nextIsLoaded says whether the allocator has prefetched the next
// segment by then (past 10 % of the current one, the default).
var uiTags = []struct {
	tag          string
	start, step  int64
	issue        int
	nextIsLoaded bool
}{
	{"invoice", 5000, 200, 120, true},     // 60 %: past the 10 % prefetch point
	{"order", 1, 1000, 57, false},         // 5.7 %: next not loaded yet
	{"user", 1<<53 + 1, 5000, 4650, true}, // 93 %, IDs past 2^53 need BigInt
}

// newUIServer runs the real Server over a real SQLite store with the
// admin API on, and issues IDs over HTTP so every tag has segments.
func newUIServer(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	st := openStore(t)
	for _, tg := range uiTags {
		if err := st.CreateTag(ctx, segment.Tag{Name: tg.tag, MaxID: tg.start, Step: tg.step}); err != nil {
			t.Fatal(err)
		}
	}
	// The allocator's clock moves 20 ms between batches: a plausible
	// rate, measured the same on any machine, ending a moment ago.
	clock := testtime.New(time.Now().Add(-time.Second))
	alloc, err := segment.New(st, segment.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alloc.Close() })
	started := time.Now()
	s, err := server.New(server.Config{Segment: alloc, Admin: st, Stats: alloc, AdminToken: uiToken,
		Locks: server.LockConfig{Backend: st.Locks()},
		Worker: func() server.WorkerStatus {
			return server.WorkerStatus{WorkerID: 3, LeaseExpiresAt: started.Add(30 * time.Second), LastTimestamp: time.Now()}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)

	// Ten batches 20 ms apart.
	for i := range 10 {
		for _, tg := range uiTags {
			n := tg.issue/10 + tg.issue%10*(i/9)
			resp, err := http.Get(fmt.Sprintf("%s/segment/%s?count=%d", ts.URL, tg.tag, n))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("issuing %d IDs of %s: %s", n, tg.tag, resp.Status)
			}
		}
		clock.Advance(20 * time.Millisecond)
	}
	// Let the background prefetches finish, so the page and the test see
	// the same, settled buffers.
	if !testtime.Until(10*time.Second, 10*time.Millisecond, func() bool {
		for _, st := range alloc.Stats() {
			if st.Loading {
				return false
			}
		}
		return true
	}) {
		t.Fatal("segment prefetch still loading after 10 s")
	}
	// A lock held for 10 minutes, for the locks panel.
	resp, err := http.Post(ts.URL+"/locks/"+uiLock, "application/json", strings.NewReader(`{"owner":"worker-a","ttl":"10m"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("acquiring %s: %s", uiLock, resp.Status)
	}
	return ts
}

const uiLock = "checkout:user-42"

// uiFixture stands for /admin/segments in the states a healthy local
// store does not reach: a load in flight and a failing store.
func uiFixture(now time.Time) gin.H {
	ts := func(d time.Duration) string { return now.Add(d).UTC().Format("2006-01-02T15:04:05.000Z07:00") }
	buf := func(start, end, pos string) gin.H { return gin.H{"start": start, "end": end, "pos": pos} }
	return gin.H{
		"mode": "segment",
		"segments": []gin.H{
			{"tag": "busy", "active": "current",
				"buffers": gin.H{"current": buf("1", "1001", "950"), "next": nil},
				"step":    2000, "row_step": 1000, "rate_per_sec": 840, "loading": true,
				"last_load": ts(-95 * time.Second), "last_load_latency_ms": 3.25, "last_error": ""},
			{"tag": "down", "active": "current",
				"buffers": gin.H{"current": buf("5000", "5500", "5200"), "next": nil},
				"step":    500, "row_step": 500, "rate_per_sec": 0.4, "loading": false,
				"last_load": nil, "last_load_latency_ms": 0, "last_error": "store: dial tcp 127.0.0.1:5432: connection refused"},
		},
		"snowflake": nil,
	}
}

// uiLocksFixture stands for /admin/locks with waiters, which a lock on a
// real server only has while their acquires are open: a holder near its
// expiry with a token past 2^53 and two waiters, and a lock being handed
// to its one waiter.
func uiLocksFixture(now time.Time) gin.H {
	ts := func(d time.Duration) string { return now.Add(d).UTC().Format(time.RFC3339Nano) }
	return gin.H{"locks": []gin.H{
		{"name": "deploy:prod", "since": ts(-95 * time.Second),
			"holder":  gin.H{"name": "deploy:prod", "owner": "ci-7", "token": "9007199254740993", "expires_at": ts(3500 * time.Millisecond)},
			"waiters": []gin.H{{"owner": "ci-8", "since": ts(-30 * time.Second)}, {"owner": "ci-9", "since": ts(-10 * time.Second)}}},
		{"name": "report", "holder": nil, "waiters": []gin.H{{"owner": "w1", "since": ts(-time.Second)}}},
	}}
}

// newFixtureServer answers /admin/segments with uiFixture and everything
// else, the page included, with the real server.
func newFixtureServer(t *testing.T, real http.Handler) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/", real)
	mux.HandleFunc("GET /admin/segments", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(uiFixture(time.Now()))
	})
	mux.HandleFunc("GET /admin/locks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(uiLocksFixture(time.Now()))
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func TestUI_Assets(t *testing.T) {
	t.Parallel()
	ts := newUIServer(t)
	for _, tc := range []struct {
		path, typ string
		status    int
		csp       bool
	}{
		{"/ui", "text/html", 200, true},
		{"/ui/", "text/html", 200, true},
		{"/ui/index.html", "text/html", 200, true},
		{"/ui/app.js", "text/javascript", 200, false},
		{"/ui/style.css", "text/css", 200, false},
		{"/ui/nope.js", "application/json", 404, false},
		{"/ui/../ui.go", "application/json", 404, false},
		{"/ui/%2e%2e/ui.go", "application/json", 404, false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(ts.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.typ) {
				t.Fatalf("Content-Type %q, want %s", ct, tc.typ)
			}
			if tc.status != 200 {
				if !strings.Contains(string(body), `"code":"not_found"`) {
					t.Fatalf("404 body %s, want the error shape", body)
				}
				return
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
				t.Fatalf("Cache-Control %q, want no-cache", cc)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); tc.csp != strings.Contains(csp, "default-src 'self'") {
				t.Fatalf("Content-Security-Policy %q, want strict: %v", csp, tc.csp)
			}
			etag := resp.Header.Get("ETag")
			req, _ := http.NewRequest("GET", ts.URL+tc.path, nil)
			req.Header.Set("If-None-Match", etag)
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if etag == "" || resp.StatusCode != http.StatusNotModified {
				t.Fatalf("revalidation with ETag %q: %d, want 304", etag, resp.StatusCode)
			}
		})
	}
}

// TestUI_Chromium loads the page in a real headless Chromium against a
// real HTTP server and checks what the JavaScript drew.
func TestUI_Chromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a headless Chromium per case; run without -short")
	}
	t.Parallel() // one Chromium after another is most of the package's time
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; CI must provide it (.ci/run installs the Debian package chromium)")
		}
		t.Skip("chromium is not installed (apt-get install chromium); skipping the browser test of /ui")
	}
	ts := newUIServer(t)
	page := ts.URL + "/ui"

	t.Run("segments", func(t *testing.T) {
		t.Parallel()
		dom := chromium(t, bin, "--dump-dom", page+"#token="+uiToken)
		if strings.Contains(dom, uiToken) {
			t.Fatal("the page echoes the token into the DOM")
		}
		// What the page should show, from the API it reads.
		var api struct {
			Segments []struct {
				Tag     string
				Buffers map[string]*struct{ Start, End, Pos string }
			}
		}
		body := adminGet(t, ts.URL+"/admin/segments", uiToken)
		if err := json.Unmarshal([]byte(body), &api); err != nil || len(api.Segments) != len(uiTags) {
			t.Fatalf("/admin/segments: %v: %s", err, body)
		}
		for i, seg := range api.Segments {
			card := cardOf(t, dom, seg.Tag)
			for _, name := range []string{"current", "next"} {
				bar := barOf(t, card, name)
				want := 0.0
				if b := seg.Buffers[name]; b != nil {
					want = share(t, b.Start, b.End, b.Pos)
				} else if !hasClass(bar["class"], "empty") {
					t.Errorf("%s: next not loaded, but its bar is not drawn empty: %v", seg.Tag, bar)
				}
				got, err := strconv.ParseFloat(bar["data-used"], 64)
				if err != nil || got != want {
					t.Errorf("%s %s: data-used %q, want %.1f", seg.Tag, name, bar["data-used"], want)
				}
			}
			if loaded := seg.Buffers["next"] != nil; loaded != uiTags[i].nextIsLoaded {
				t.Errorf("%s: next loaded = %v, want %v", seg.Tag, loaded, uiTags[i].nextIsLoaded)
			}
		}
		for _, want := range []string{"9,007,199,254,740,993", "×2", "IDs/s", "s ago", "Worker ID"} {
			if !strings.Contains(dom, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		if sf := elementByID(dom, "snowflake"); sf == nil || sf["data-state"] != "ready" {
			t.Errorf("snowflake panel %v, want data-state=ready", sf)
		}

		// The locks panel, from the API it reads.
		var locks struct {
			Locks []struct {
				Name   string
				Holder struct{ Owner, Token string }
			}
		}
		body = adminGet(t, ts.URL+"/admin/locks", uiToken)
		if err := json.Unmarshal([]byte(body), &locks); err != nil || len(locks.Locks) != 1 || locks.Locks[0].Name != uiLock {
			t.Fatalf("/admin/locks: %v: %s", err, body)
		}
		if p := elementByID(dom, "locks"); p == nil || p["data-state"] != "held" {
			t.Errorf("locks panel %v, want data-state=held", p)
		}
		row := rowOf(t, dom, uiLock)
		for field, want := range map[string]string{"holder": locks.Locks[0].Holder.Owner, "token": locks.Locks[0].Holder.Token, "waiters": "none"} {
			if got := cellText(t, row, field); got != want {
				t.Errorf("%s's %s: %q, want %q", uiLock, field, got, want)
			}
		}
		// Acquired for 10 minutes moments before the page loaded.
		if left := cellNum(t, row, "ttl", "data-seconds-left"); left < 480 || left > 600 {
			t.Errorf("%s's TTL left: %d s, want about 600", uiLock, left)
		}
		if age := cellNum(t, row, "age", "data-seconds"); age < 0 || age > 120 {
			t.Errorf("%s's age: %d s, want a few", uiLock, age)
		}
	})

	t.Run("loading and failing tags", func(t *testing.T) {
		t.Parallel()
		dom := chromium(t, bin, "--dump-dom", newFixtureServer(t, ts.Config.Handler).URL+"/ui#token="+uiToken)
		if got := barOf(t, cardOf(t, dom, "busy"), "next"); !hasClass(got["class"], "loading") {
			t.Errorf("next bar of a loading tag: %v, want class loading", got)
		}
		for _, want := range []string{"loading…", "connection refused", "load failed", "Snowflake mode is off"} {
			if !strings.Contains(dom, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		if sf := elementByID(dom, "snowflake"); sf == nil || sf["data-state"] != "off" {
			t.Errorf("snowflake panel %v, want data-state=off", sf)
		}

		// Locks with waiters, from uiLocksFixture.
		if p := elementByID(dom, "locks"); p == nil || p["data-state"] != "waiting" {
			t.Errorf("locks panel %v, want data-state=waiting", p)
		}
		prod := rowOf(t, dom, "deploy:prod")
		if a := elements(prod, "tr")[0]; !hasClass(a["class"], "warn") || a["data-state"] != "held" {
			t.Errorf("deploy:prod, 3.5 s left: row %v, want class warn and data-state=held", a)
		}
		if got := cellText(t, prod, "token"); got != "9007199254740993" {
			t.Errorf("deploy:prod's token %q, want 9007199254740993 exactly", got)
		}
		if got := cellNum(t, prod, "waiters", "data-count"); got != 2 {
			t.Errorf("deploy:prod's waiters: %d, want 2", got)
		}
		w := cellText(t, prod, "waiters")
		if i, j := strings.Index(w, "ci-8"), strings.Index(w, "ci-9"); i < 0 || j < i {
			t.Errorf("deploy:prod's waiters %q, want ci-8 then ci-9", w)
		}
		if age := cellNum(t, prod, "age", "data-seconds"); age < 93 || age > 120 { // the Date header drops the fraction
			t.Errorf("deploy:prod's age %d s, want about 95", age)
		}
		report := rowOf(t, dom, "report")
		if a := elements(report, "tr")[0]; a["data-state"] != "free" || cellText(t, report, "holder") != "free" {
			t.Errorf("report, being handed over: row %v, holder %q; want free", a, cellText(t, report, "holder"))
		}
	})

	t.Run("locks off", func(t *testing.T) {
		t.Parallel()
		// A server without a lock store answers /admin/locks so.
		mux := http.NewServeMux()
		mux.Handle("/", ts.Config.Handler)
		mux.HandleFunc("GET /admin/locks", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"locks_disabled","message":"this server serves no locks: it has no lock store"}}`)
		})
		off := httptest.NewServer(mux)
		t.Cleanup(off.Close)
		dom := chromium(t, bin, "--dump-dom", off.URL+"/ui#token="+uiToken)
		if p := elementByID(dom, "locks"); p == nil || p["data-state"] != "off" || !strings.Contains(dom, "Locks are off") {
			t.Errorf("locks panel %v, want data-state=off and its note", p)
		}
		if len(cardOf(t, dom, "invoice")) == 0 {
			t.Error("the segments are not shown beside the locks that are off")
		}
	})

	t.Run("wrong token", func(t *testing.T) {
		t.Parallel()
		dom := chromium(t, bin, "--dump-dom", page+"#token=wrong")
		if !strings.Contains(strings.ToLower(dom), "paste the admin token") {
			t.Fatalf("no prompt for the token after a 403:\n%s", dom)
		}
		if strings.Contains(dom, "data-tag=") {
			t.Fatal("tags shown without a valid token")
		}
	})

	// Screenshots for people: the page as CI saw it, light, dark and on
	// a phone. ui.png is the one to look at first.
	dir, err := filepath.Abs(filepath.Join("..", ".artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, shot := range []struct{ name, size, extra string }{
		{"ui.png", "1280,900", ""},
		{"ui-dark.png", "1280,900", "--force-dark-mode"},
		{"ui-phone.png", "390,844", ""},
	} {
		t.Run("screenshot "+shot.name, func(t *testing.T) {
			t.Parallel()
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			png := filepath.Join(dir, shot.name)
			_ = os.Remove(png)
			args := []string{"--screenshot=" + png, "--window-size=" + shot.size, "--hide-scrollbars"}
			if shot.extra != "" {
				args = append(args, shot.extra)
			}
			chromium(t, bin, append(args, page+"#token="+uiToken)...)
			if fi, err := os.Stat(png); err != nil || fi.Size() < 10<<10 {
				t.Fatalf("screenshot %s not written or blank: %v", png, err)
			}
			t.Logf("screenshot of /ui: %s", png)
		})
	}
}

// chromium runs headless Chromium on one URL and returns its standard
// output. It is killed, with its whole process group, after 60 s. Script
// errors and CSP refusals on the page's console fail the test.
func chromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=8000", "--enable-logging=stderr", "--v=0"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("chromium did not finish within 60 s and was killed; stderr:\n%s", lastLines(stderr.String(), 20))
	}
	if err != nil {
		t.Fatalf("chromium: %v; stderr:\n%s", err, lastLines(stderr.String(), 20))
	}
	t.Logf("chromium %s took %v", args[0], time.Since(start).Round(time.Millisecond))
	// The page logs nothing itself: any script error or refused load
	// (a CSP violation) on its console fails the test.
	for _, line := range strings.Split(stderr.String(), "\n") {
		if !strings.Contains(line, ":CONSOLE") {
			continue
		}
		if strings.Contains(line, "Uncaught") || strings.Contains(line, "Refused to") || strings.Contains(line, "Content Security Policy") {
			t.Errorf("page console: %s", line)
		} else {
			t.Logf("page console: %s", line)
		}
	}
	return stdout.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var (
	reAttr = regexp.MustCompile(`([a-zA-Z-]+)="([^"]*)"`)
	reCard = regexp.MustCompile(`<article [^>]*data-tag="`)
)

// elements returns the attributes of every <name …> start tag in html.
func elements(html, name string) []map[string]string {
	re := regexp.MustCompile(`<` + name + `(\s[^>]*)?>`)
	var out []map[string]string
	for _, m := range re.FindAllStringSubmatch(html, -1) {
		a := map[string]string{}
		for _, kv := range reAttr.FindAllStringSubmatch(m[1], -1) {
			a[kv[1]] = kv[2]
		}
		out = append(out, a)
	}
	return out
}

func hasClass(list, c string) bool {
	for _, f := range strings.Fields(list) {
		if f == c {
			return true
		}
	}
	return false
}

// cardOf returns the markup of the tag's card, up to the next card.
func cardOf(t *testing.T, dom, tag string) string {
	t.Helper()
	i := strings.Index(dom, fmt.Sprintf(`data-tag="%s"`, tag))
	if i < 0 {
		t.Fatalf("no element with data-tag=%q in the page", tag)
	}
	rest := dom[i:]
	if j := reCard.FindStringIndex(rest[1:]); j != nil {
		rest = rest[:j[0]+1]
	}
	return rest
}

// barOf returns the attributes of the tag card's bar for buffer.
func barOf(t *testing.T, card, buffer string) map[string]string {
	t.Helper()
	for _, a := range elements(card, "div") {
		if hasClass(a["class"], "bar") && a["data-buffer"] == buffer {
			return a
		}
	}
	t.Fatalf("no bar with data-buffer=%q in %s", buffer, card)
	return nil
}

func elementByID(html, id string) map[string]string {
	for _, a := range elements(html, "[a-z]+") {
		if a["id"] == id {
			return a
		}
	}
	return nil
}

// rowOf returns the markup of the lock's row in the locks panel.
func rowOf(t *testing.T, dom, name string) string {
	t.Helper()
	i := strings.Index(dom, fmt.Sprintf(`<tr data-lock="%s"`, name))
	if i < 0 {
		t.Fatalf("no row with data-lock=%q in the page", name)
	}
	rest := dom[i:]
	if j := strings.Index(rest, "</tr>"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

var reTag = regexp.MustCompile(`<[^>]*>`)

// cell returns the attributes and the markup of the row's cell field.
func cell(t *testing.T, row, field string) (map[string]string, string) {
	t.Helper()
	re := regexp.MustCompile(`<td([^>]*data-field="` + field + `"[^>]*)>(.*?)</td>`)
	m := re.FindStringSubmatch(row)
	if m == nil {
		t.Fatalf("no cell %q in %s", field, row)
	}
	a := map[string]string{}
	for _, kv := range reAttr.FindAllStringSubmatch(m[1], -1) {
		a[kv[1]] = kv[2]
	}
	return a, m[2]
}

// cellText is the cell's text, tags removed.
func cellText(t *testing.T, row, field string) string {
	t.Helper()
	_, inner := cell(t, row, field)
	return strings.TrimSpace(reTag.ReplaceAllString(inner, " "))
}

// cellNum is the cell's integer attribute attr.
func cellNum(t *testing.T, row, field, attr string) int {
	t.Helper()
	a, _ := cell(t, row, field)
	n, err := strconv.Atoi(a[attr])
	if err != nil {
		t.Fatalf("cell %q: %s=%q: %v", field, attr, a[attr], err)
	}
	return n
}

// share is the used percentage the page must show: tenths, floored.
func share(t *testing.T, start, end, pos string) float64 {
	t.Helper()
	var v [3]int64
	for i, s := range []string{start, end, pos} {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("ID %q: %v", s, err)
		}
		v[i] = n
	}
	return float64((v[2]-v[0])*1000/(v[1]-v[0])) / 10
}

func adminGet(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}
