//go:build unix

package server

import (
	"bytes"
	"context"
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
)

const uiToken = "t0ken"

// uiFixture stands in for the admin API until it lands: three tags in
// three states and a snowflake worker.
func uiFixture(now time.Time) gin.H {
	ts := func(d time.Duration) string { return now.Add(d).UTC().Format("2006-01-02T15:04:05.000Z07:00") }
	buf := func(start, end, pos string) gin.H { return gin.H{"start": start, "end": end, "pos": pos} }
	return gin.H{
		"mode": "segment",
		"segments": []gin.H{
			{"tag": "order", "active": "current",
				"buffers": gin.H{"current": buf("1", "1001", "57"), "next": buf("1001", "3001", "1001")},
				"step":    2000, "row_step": 1000, "rate_per_sec": 12.5, "loading": false,
				"last_load": ts(-3 * time.Second), "last_load_latency_ms": 1.7, "last_error": ""},
			{"tag": "user", "active": "current",
				"buffers": gin.H{"current": buf("9007199254740993", "9007199254750993", "9007199254750293"), "next": nil},
				"step":    10000, "row_step": 10000, "rate_per_sec": 840, "loading": true,
				"last_load": ts(-95 * time.Second), "last_load_latency_ms": 3.25, "last_error": ""},
			{"tag": "invoice", "active": "current",
				"buffers": gin.H{"current": buf("5000", "5500", "5200"), "next": nil},
				"step":    500, "row_step": 500, "rate_per_sec": 0.4, "loading": false,
				"last_load": nil, "last_load_latency_ms": 0, "last_error": "store: dial tcp 127.0.0.1:5432: connection refused"},
		},
		"snowflake": gin.H{"worker_id": 3, "lease_expires_at": ts(27 * time.Second),
			"last_timestamp": ts(-1 * time.Second), "ready": true, "error": ""},
	}
}

func newUIServer(t *testing.T) *httptest.Server {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	registerUI(e)
	e.GET("/admin/segments", func(c *gin.Context) {
		switch c.GetHeader("Authorization") {
		case "":
			c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": gin.H{"code": "unauthorized", "message": "send Authorization: Bearer <token>"}})
		case "Bearer " + uiToken:
			c.JSON(http.StatusOK, uiFixture(time.Now()))
		default:
			c.AbortWithStatusJSON(http.StatusForbidden, gin.H{"error": gin.H{"code": "forbidden", "message": "the token is wrong"}})
		}
	})
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	return ts
}

func TestUI_Assets(t *testing.T) {
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
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; CI must provide it (.ci/run installs the Debian package chromium)")
		}
		t.Skip("chromium is not installed (apt-get install chromium); skipping the browser test of /ui")
	}
	ts := newUIServer(t)
	page := ts.URL + "/ui"
	tags := []string{"invoice", "order", "user"}

	t.Run("segments", func(t *testing.T) {
		dom := chromium(t, bin, "--dump-dom", page+"#token="+uiToken)
		if strings.Contains(dom, uiToken) {
			t.Fatal("the page echoes the token into the DOM")
		}
		for _, tag := range tags {
			card := cardOf(t, dom, tag)
			bars := map[string]float64{}
			for _, a := range elements(card, "div") {
				if !hasClass(a["class"], "bar") {
					continue
				}
				used, err := strconv.ParseFloat(a["data-used"], 64)
				if err != nil || used < 0 || used > 100 {
					t.Fatalf("tag %s: bar %v has data-used %q, want a percentage", tag, a, a["data-used"])
				}
				bars[a["data-buffer"]] = used
			}
			if _, ok := bars["current"]; !ok || len(bars) != 2 {
				t.Fatalf("tag %s: bars %v, want current and next", tag, bars)
			}
		}
		// Exact shares from the fixture, through BigInt for IDs past 2^53.
		for _, tc := range []struct {
			tag, buffer string
			used        float64
		}{{"order", "current", 5.6}, {"order", "next", 0}, {"user", "current", 93}, {"invoice", "current", 40}} {
			if got := barUsed(t, cardOf(t, dom, tc.tag), tc.buffer); got != tc.used {
				t.Errorf("%s %s: data-used %v, want %v", tc.tag, tc.buffer, got, tc.used)
			}
		}
		for _, want := range []string{"loading…", "connection refused", "×2", "s ago", "9,007,199,254,750,293"} {
			if !strings.Contains(dom, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		sf := elements(dom, "div")
		found := false
		for _, a := range sf {
			if a["id"] == "snowflake" {
				found = a["data-state"] == "ready"
			}
		}
		if !found || !strings.Contains(dom, "Worker ID") {
			t.Error("snowflake panel missing or not ready")
		}
	})

	t.Run("wrong token", func(t *testing.T) {
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
// output. It is killed, with its whole process group, after 60 s.
func chromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=8000"}
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

func barUsed(t *testing.T, card, buffer string) float64 {
	t.Helper()
	for _, a := range elements(card, "div") {
		if hasClass(a["class"], "bar") && a["data-buffer"] == buffer {
			v, err := strconv.ParseFloat(a["data-used"], 64)
			if err != nil {
				t.Fatalf("data-used %q: %v", a["data-used"], err)
			}
			return v
		}
	}
	t.Fatalf("no %s bar in %s", buffer, card)
	return 0
}
