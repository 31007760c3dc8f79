package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/internal/testtime"

	"github.com/idgen/idgen/store/dbtest"
)

// nginxBinary finds Debian's nginx, or skips the test without it, unless
// CI or IDGEN_REQUIRE_DOCKER=1 says the machine must have it (.ci/run
// installs it).
func nginxBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	dbtest.Missing(t, "nginx is not installed (apt-get install --no-install-recommends nginx)")
	return ""
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startCachingNginx runs nginx in the foreground on a loopback port of
// its own, as a caching reverse proxy in front of upstream with the
// common line proxy_cache_valid 200 1m, POST cached too (a cache keyed on
// the URL alone), and returns its base URL.
func startCachingNginx(t *testing.T, upstream string) string {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	port := freePort(t)
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // the workers write the cache in dir
	}
	conf := fmt.Sprintf(`%s
daemon off;
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path %[2]s/body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;
  proxy_cache_path %[2]s/cache keys_zone=ids:1m;
  server {
    listen 127.0.0.1:%[3]d;
    location / {
      proxy_pass http://%[4]s;
      proxy_http_version 1.1;
      proxy_cache ids;
      proxy_cache_methods GET HEAD POST;
      proxy_cache_valid 200 1m;
      add_header X-Cache-Status $upstream_cache_status always;
    }
  }
}
`, user, dir, port, upstream)
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", file)
	// A file, not a pipe: the workers inherit it, and a pipe would hold
	// Wait until they exit.
	out, err := os.Create(filepath.Join(dir, "nginx.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// SIGTERM: the master stops its workers, then exits.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := testtime.WaitFor(20*time.Second, 50*time.Millisecond, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	}); err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		o, _ := os.ReadFile(out.Name())
		t.Fatalf("nginx did not listen on %s: %v: %s\n%s", addr, err, o, b)
	}
	return "http://" + addr
}

// Behind nginx with proxy_cache_valid 200 1m, the common cache line,
// every call of /id/order and of the Connect Next gets IDs of its own:
// idgen marks their answers Cache-Control: no-store, so the proxy never
// answers one from its cache. A route that issues nothing is cached by
// the same proxy, which shows the cache is on.
func TestServe_BehindCachingNginx(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")})
	proxy := startCachingNginx(t, p.Addr())
	client := &http.Client{Timeout: 10 * time.Second}
	call := func(method, path, body string) (string, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, proxy+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s through nginx: %d %s", method, path, resp.StatusCode, b)
		}
		return string(b), resp.Header.Get("X-Cache-Status")
	}

	// The control: the proxy caches what idgen lets it.
	call("GET", "/snowflake/decode/120649686288695296", "")
	if _, status := call("GET", "/snowflake/decode/120649686288695296", ""); status != "HIT" {
		t.Fatalf("the second GET of a decode is %q, want HIT: the proxy does not cache, so the test shows nothing", status)
	}

	for _, tc := range []struct {
		name, method, path, body string
	}{
		{"GET /id/order", "GET", "/id/order", ""},
		{"Connect Next", "POST", "/idgen.v1.IDService/Next", `{"tag":"order"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]bool{}
			hits := 0
			for range 100 {
				body, status := call(tc.method, tc.path, tc.body)
				if status == "HIT" {
					hits++
				}
				var r struct {
					ID  string
					IDs []string
				}
				if err := json.Unmarshal([]byte(body), &r); err != nil {
					t.Fatalf("%s: %v in %s", tc.name, err, body)
				}
				ids := r.IDs
				if r.ID != "" {
					ids = []string{r.ID}
				}
				if len(ids) != 1 {
					t.Fatalf("%s: %s, want one ID", tc.name, body)
				}
				seen[ids[0]] = true
			}
			t.Logf("%s: 100 calls through nginx, %d distinct IDs, %d cache hits", tc.name, len(seen), hits)
			if len(seen) != 100 || hits != 0 {
				t.Fatalf("%s: 100 calls through a caching nginx gave %d distinct IDs and %d cache hits, want 100 and 0", tc.name, len(seen), hits)
			}
		})
	}
}
