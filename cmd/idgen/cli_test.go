package main_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
)

// Bad flags fail in flag terms before serve touches the database: no
// schema, no lease, no file.
func TestServe_RejectsBadFlagsBeforeAnySideEffect(t *testing.T) {
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	db := filepath.Join(dir, "never.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "bogus"}, `--mode must be segment or snowflake, got "bogus"`},
		{[]string{"--mode", "snowflake", "--snowflake=false"}, "--mode snowflake needs --snowflake=true"},
		{[]string{"--log-format", "xml"}, "--log-format must be text or json"},
		{[]string{"--max-tags", "-1"}, "--max-tags must be 0 (no limit) or more"},
		{[]string{"--worker-id", "5000"}, "--worker-id must be -1 (lease one) or 0 to 1023"},
		{[]string{"--admin-token", "abc"}, "--admin-token must be at least 16 characters"},
		{[]string{"--metrics-token", "abc"}, "--metrics-token must be at least 16 characters"},
		{[]string{"--api-tokens", "short=*"}, "--api-tokens: "},
		{[]string{"--admin-token", "same-token-for-both", "--api-tokens", "same-token-for-both=*"}, "--admin-token must differ"},
		{[]string{"--trusted-proxies", "10.0.0.0/33"}, "--trusted-proxies: \"10.0.0.0/33\""},
		{[]string{"--max-batch", "0"}, "--max-batch must be at least 1"},
		{[]string{"--idempotency-ttl", "200h"}, "--idempotency-ttl (200h0m0s) must not exceed --idempotency-max-ttl (168h0m0s)"},
		{[]string{"--idempotency-lock-timeout", "10ms"}, "--idempotency-lock-timeout must be at least 1s"},
		{[]string{"--idempotency-max-keys", "-1"}, "--idempotency-max-keys must be 0 (no limit) or more"},
		{[]string{"--idempotency-sweep-batch", "0"}, "--idempotency-sweep-batch must be at least 1"},
	} {
		out, err := exec.Command(bin, append([]string{"serve", "--store", "sqlite://" + db}, tc.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "Config") {
			t.Errorf("serve %v: err %v, output %q; want a failure saying %q", tc.args, err, out, tc.want)
		}
		if _, err := os.Stat(db); err == nil {
			t.Fatalf("serve %v created the database before failing", tc.args)
		}
	}
}

func TestCLI_Messages(t *testing.T) {
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	dsn := "sqlite://" + filepath.Join(dir, "cli.db")
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr bool
	}{
		{[]string{"tag", "step", "user", "-5", "--store", dsn}, "invalid step or start: a step is a whole number of at least 1, got -5", true},
		{[]string{"tag", "step", "ghost", "5", "--store", dsn}, `tag not found: "ghost"; create it with idgen tag add`, true},
		{[]string{"tag", "add", "bad tag", "--store", dsn}, "idgen: invalid tag", true},
		{[]string{"version"}, "idgen ", false},
		{[]string{"--version"}, "idgen ", false},
	} {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		if (err != nil) != tc.wantErr || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "idgen: idgen:") ||
			strings.Contains(string(out), "auto-create") {
			t.Errorf("idgen %v: err %v, output %q; want error=%v and %q", tc.args, err, out, tc.wantErr, tc.want)
		}
	}
}

// The version set at link time shows in the CLI, in the startup line and
// in idgen_build_info; the startup line says what runs, without the
// store's password.
func TestServe_VersionAndStartupLine(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "idgen-versioned")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7-test", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "idgen v9.8.7-test" {
		t.Fatalf("--version: %v %q", err, out)
	}
	// A password in the DSN's query must not reach the log either.
	dsn := "sqlite://" + filepath.Join(dir, "v.db") + "?password=hunter2-secret"
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=" + dsn, "IDGEN_MAX_TAGS=77"},
		"--admin-token", "an-admin-token-of-length", "--metrics-token", "a-metrics-token-000001")
	var line string
	for _, l := range strings.Split(p.Log(), "\n") {
		if strings.Contains(l, "msg=serving") {
			line = l
		}
	}
	for _, want := range []string{"version=v9.8.7-test", "mode=segment", "admin_api=on", "api_tokens=0",
		"metrics_token=on", "auto_create_tags=true", "max_tags=77", "password=xxxxx"} {
		if !strings.Contains(line, want) {
			t.Errorf("startup line lacks %s: %s", want, line)
		}
	}
	if strings.Contains(p.Log(), "hunter2") || strings.Contains(p.Log(), "an-admin-token") {
		t.Errorf("log holds a secret:\n%s", p.Log())
	}
	ctx := context.Background()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer a-metrics-token-000001")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(b), `idgen_build_info{goversion="go`) || !strings.Contains(string(b), `version="v9.8.7-test"} 1`) {
		t.Fatalf("/metrics lacks idgen_build_info for v9.8.7-test")
	}
	if status, _, _ := p.Get(ctx, &http.Client{Timeout: 10 * time.Second}, "/metrics"); status != 401 {
		t.Fatalf("/metrics without the token = %d, want 401", status)
	}
}
