package main_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
)

// Bad flags fail in flag terms before serve touches the database: no
// schema, no lease, no file.
func TestServe_RejectsBadFlagsBeforeAnySideEffect(t *testing.T) {
	t.Parallel()
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
		{[]string{"--max-tags", "-1"}, "--max-tags must be from 0 (no limit) to 1000000"},
		{[]string{"--worker-id", "5000"}, "--worker-id must be -1 (lease one) or 0 to 1023"},
		{[]string{"--admin-token", "abc"}, "--admin-token must be at least 16 characters"},
		{[]string{"--metrics-token", "abc"}, "--metrics-token must be at least 16 characters"},
		{[]string{"--api-tokens", "short=*"}, "--api-tokens: "},
		{[]string{"--api-tokens", "/nonexistent/tokens"}, "--api-tokens: cannot read the token file: open /nonexistent/tokens: no such file or directory"},
		{[]string{"--port", "8081"}, "unknown flag: --port: the listen address is --addr (IDGEN_ADDR)"},
		{[]string{"--admin-token", "same-token-for-both", "--api-tokens", "same-token-for-both=*"}, "--admin-token must differ"},
		{[]string{"--trusted-proxies", "10.0.0.0/33"}, "--trusted-proxies: \"10.0.0.0/33\""},
		{[]string{"--max-batch", "0"}, "--max-batch must be from 1 to 100000"},
		{[]string{"--max-locks", "0"}, "--max-locks must be from 1 to 1000000"},
		{[]string{"--lock-min-ttl", "5ms"}, "--lock-min-ttl and --lock-max-ttl must satisfy 10ms ≤ min ≤ max ≤ 24h0m0s, got 5ms and 10m0s"},
		{[]string{"--lock-min-ttl", "1m", "--lock-max-ttl", "30s"}, "--lock-min-ttl and --lock-max-ttl must satisfy"},
		{[]string{"--lock-max-wait", "0s"}, "--lock-max-wait must be above 0s and at most 20s"},
		{[]string{"--lock-store", "mysql://h/x"}, `bad --lock-store (IDGEN_LOCK_STORE): mysql://h/x: scheme "mysql" is not a Redis one`},
		{[]string{"--lock-store", "redis://:S3cret@127.0.0.1:6379/abc"}, `redis://:xxxxx@127.0.0.1:6379/abc: invalid database number: "abc"; use redis://`},
		{[]string{"--lock-store", "redis://127.0.0.1:6379?prefix=a{b"}, "prefix= must be non-empty and without braces"},
		{[]string{"--lock-max-wait", "1m"}, "--lock-max-wait must be above 0s and at most 20s"},
		// Every numeric flag has an upper bound too (issue 19 item 4).
		{[]string{"--max-batch", "1000000"}, "--max-batch must be from 1 to 100000 (one answer is built in memory), got 1000000"},
		{[]string{"--default-step", "3000000000"}, "--default-step must be from 1 to 2147483647"},
		{[]string{"--max-step", "3000000000"}, "--max-step must be from 1 to 2147483647"},
		{[]string{"--max-range", "3000000000"}, "--max-range must be from 1 to 2147483647"},
		{[]string{"--lease-ttl", "48h"}, "--lease-ttl must be from 1s to 24h0m0s"},
		{[]string{"--worker-range", "0-9223372036854775807"}, "--worker-range: invalid config: worker range \"0-9223372036854775807\": LAST must be below"},
		{[]string{"--snowflake-layout", "41/9/13", "--worker-id", "600"}, "--worker-id must be -1 (lease one) or 0 to 511, the worker IDs of --snowflake-layout 41/9/13, got 600"},
		{[]string{"--addr", "8081"}, `--addr must be host:port or :port, such as :8080 or 127.0.0.1:8080, got "8081"`},
		// Numbers are whole decimal numbers, nothing else (item 9).
		{[]string{"--default-step", "1e3"}, `invalid argument "1e3" for "--default-step" flag: "1e3" is not a whole number`},
		{[]string{"--max-batch", "0x10"}, `invalid argument "0x10" for "--max-batch" flag: "0x10" is not a whole number`},
		{[]string{"--max-step", "5x"}, `"5x" is not a whole number`},
		{[]string{"--metrics-tag-limit", "0x10"}, `invalid argument "0x10" for "--metrics-tag-limit" flag: "0x10" is not a whole number`},
		{[]string{"--idempotency-max-keys", "1_000"}, `invalid argument "1_000" for "--idempotency-max-keys" flag: "1_000" is not a whole number`},
		{[]string{"--idempotency-sweep-batch", "0b11"}, `invalid argument "0b11" for "--idempotency-sweep-batch" flag: "0b11" is not a whole number`},
		{[]string{"--idempotency-sweep-batch", "2000000"}, "--idempotency-sweep-batch must be from 1 to 1000000"},
		// A store that does not outlive the process (issue 17 item 4).
		{[]string{"--store", "sqlite://:memory:"}, "in-memory database is lost with its connection and the process, so IDs would repeat: use a file"},
		{[]string{"--store", "file::memory:?cache=shared"}, "use a file"},
		{[]string{"--store", "sqlite://./idgen.db?mode=memory"}, "use a file"},
		// A DSN must say what it is (items 12 and 13).
		{[]string{"--store", "sqlite:/idgen.db"}, "sqlite needs :// after it: use sqlite://PATH (sqlite://./idgen.db, sqlite:///var/lib/idgen/idgen.db)"},
		{[]string{"--store", "root:S3cret@tcp(127.0.0.1:3306)/idgen"}, "the DSN has no scheme: use sqlite://PATH"},
		{[]string{"--idempotency-ttl", "200h"}, "--idempotency-ttl (200h0m0s) must not exceed --idempotency-max-ttl (168h0m0s)"},
		{[]string{"--idempotency-max-ttl", "8760h"}, "--idempotency-max-ttl must be at most 168h0m0s"},
		{[]string{"--idempotency-lock-timeout", "10ms"}, "--idempotency-lock-timeout must be at least 1s"},
		{[]string{"--idempotency-max-keys", "-1"}, "--idempotency-max-keys must be 0 (no limit) or more"},
		{[]string{"--idempotency-sweep-batch", "0"}, "--idempotency-sweep-batch must be from 1 to 1000000"},
	} {
		work := t.TempDir() // the working directory, where a DSN taken for a path would become a file
		// A serve that accepts the flags starts serving: stop it and report.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c := exec.CommandContext(ctx, bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--store", "sqlite://" + db}, tc.args...)...)
		c.Dir = work
		out, err := c.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "Config") || strings.Contains(string(out), "S3cret") {
			t.Errorf("serve %v: err %v, output %q; want a failure saying %q", tc.args, err, out, tc.want)
		}
		if _, err := os.Stat(db); err == nil {
			t.Errorf("serve %v created the database before failing", tc.args)
			_ = os.Remove(db)
		}
		if left, _ := os.ReadDir(work); len(left) > 0 {
			t.Errorf("serve %v created %v in its working directory", tc.args, left[0].Name())
		}
	}
}

// Commands that read or change what a store holds never create one: a
// typo in a SQLite path must fail, not answer from an empty new file; a
// PostgreSQL key=value DSN is PostgreSQL, never a file named after it,
// and its password is written nowhere.
func TestCLI_NoStoreCreatedByMistake(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	kv := "host=127.0.0.1 port=1 user=postgres password=S3cret dbname=x sslmode=disable connect_timeout=2"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tag", "list", "--store", "sqlite://./other.db"}, "no SQLite file at ./other.db: check the path"},
		{[]string{"tag", "step", "order", "10", "--store", "sqlite://./other.db"}, "no SQLite file at ./other.db"},
		{[]string{"tag", "bump", "--all", "--by", "10", "--store", "sqlite://./other.db"}, "no SQLite file at ./other.db"},
		{[]string{"import", "leaf", "--from", "sqlite://./leaf.db", "--store", "sqlite://./idgen.db"}, "--from: --store: no SQLite file at ./leaf.db"},
		{[]string{"tag", "list", "--store", kv}, "postgres: connect to 127.0.0.1"},
		{[]string{"serve", "--store", kv}, "postgres: connect to 127.0.0.1"},
	} {
		work := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a serve that starts is stopped
		c := exec.CommandContext(ctx, bin, tc.args...)
		c.Dir = work
		out, err := c.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "S3cret") {
			t.Errorf("idgen %v: err %v, output %q; want a failure saying %q, without the password", tc.args, err, out, tc.want)
		}
		if left, _ := os.ReadDir(work); len(left) > 0 {
			t.Errorf("idgen %v created %s", tc.args, left[0].Name())
		}
	}
}

// serve says in its startup line whether it created the store, and that
// its ID endpoints are open to anyone when no --api-tokens are set.
func TestServe_StartupLineSaysNewStoreAndOpenAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	env := []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "new.db")}
	startup := func(p *proctest.Proc) string {
		for _, l := range strings.Split(p.Log(), "\n") {
			if strings.Contains(l, "msg=serving") {
				return l
			}
		}
		return ""
	}
	p := proctest.Serve(t, bin, env)
	// No "open without auth" warning: the address is a loopback one
	// (TestCLI_FirstUseMessages shows it on 0.0.0.0).
	if line := startup(p); !strings.Contains(line, "new_store=true") || !strings.Contains(line, "auth=none") ||
		strings.Contains(p.Log(), "open without auth") || !strings.Contains(p.Log(), "did not exist and was created") {
		t.Fatalf("first start on a new file; log:\n%s", p.Log())
	}
	if err := p.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	p = proctest.Serve(t, bin, env, "--api-tokens", "a-client-token-0000001=*")
	if line := startup(p); !strings.Contains(line, "new_store=false") || !strings.Contains(line, "auth=api-tokens") ||
		strings.Contains(p.Log(), "open without auth") || strings.Contains(p.Log(), "did not exist") {
		t.Fatalf("second start on the same file, with a token; log:\n%s", p.Log())
	}
}

// A busy port fails before the store is touched, and names --addr.
func TestServe_BusyPortNamesAddr(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	db := filepath.Join(dir, "busy.db")
	out, err := exec.Command(bin, "serve", "--addr", ln.Addr().String(), "--store", "sqlite://"+db).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the port is in use by another process: stop it, or pick another address with --addr (IDGEN_ADDR)") {
		t.Fatalf("serve on a busy port: err %v, output %q", err, out)
	}
	if _, err := os.Stat(db); err == nil {
		t.Fatalf("serve on a busy port created the store before failing")
	}
}

// A bad value in the environment names the variable and what it takes,
// not strconv's words.
func TestCLI_BadEnvNamesVariable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	for _, tc := range []struct{ env, want string }{
		{"IDGEN_ACCESS_LOG=maybe", `IDGEN_ACCESS_LOG="maybe" is not a boolean: set it to true or false`},
		{"IDGEN_AUTO_CREATE_TAGS=yes", `IDGEN_AUTO_CREATE_TAGS="yes" is not a boolean`},
		{"IDGEN_MAX_BATCH=1e3", `IDGEN_MAX_BATCH="1e3": "1e3" is not a whole number`},
	} {
		c := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--store", "sqlite://"+filepath.Join(dir, "never.db"))
		c.Env = append(os.Environ(), tc.env)
		out, err := c.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "strconv") {
			t.Errorf("%s: err %v, output %q; want a failure saying %q", tc.env, err, out, tc.want)
		}
	}
}

func TestCLI_Messages(t *testing.T) {
	t.Parallel()
	// A Leaf (Twitter epoch) ID made now reads as 2042 in idgen's layout.
	leafID := strconv.FormatInt((time.Now().UnixMilli()-1288834974657)<<22|5<<12|7, 10)
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	dsn := "sqlite://" + filepath.Join(dir, "cli.db")
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr bool
	}{
		{[]string{"tag", "step", "user", "-5", "--store", dsn}, "invalid step: a step is a whole number of at least 1, got -5", true},
		{[]string{"migrate", "--store", dsn}, "schema at version", false},
		{[]string{"tag", "step", "ghost", "5", "--store", dsn}, `tag not found: "ghost"; create it with idgen tag add ghost`, true},
		{[]string{"tag", "step", "ghost", "1e3", "--store", dsn}, `invalid step: "1e3" is not a whole number`, true},
		{[]string{"tag", "step", "ghost", "5x", "--store", dsn}, `invalid step: "5x" is not a whole number`, true},
		{[]string{"tag", "step", "ghost", "0x10", "--store", dsn}, `invalid step: "0x10" is not a whole number`, true},
		{[]string{"tag", "add", "t1", "--step", "1e3", "--store", dsn}, `invalid argument "1e3" for "--step" flag: "1e3" is not a whole number`, true},
		{[]string{"tag", "bump", "ghost", "--by", "0x10", "--store", dsn}, `"0x10" is not a whole number`, true},
		{[]string{"tag", "bump", "ghost", "--by", "10", "--store", dsn}, `tag not found: "ghost"; create it with idgen tag add ghost`, true},
		{[]string{"tag", "bump", "ghost", "--to", "10", "--store", dsn}, `tag not found: "ghost"`, true},
		{[]string{"import", "leaf", "--from", dsn, "--margin", "1e3", "--store", dsn}, `"1e3" is not a whole number`, true},
		// CLI wording (issue 19 item 20).
		{[]string{"tag", "bump", "--store", dsn}, "name the tags to bump, or pass --all for every tag", true},
		{[]string{"tag", "bump", "order", "--all", "--by", "5", "--store", dsn}, "name tags, or pass --all, not both", true},
		{[]string{"tag", "lst"}, `unknown command "lst" for "idgen tag"; did you mean "list"?`, true},
		{[]string{"tag", "frobnicate"}, `unknown command "frobnicate" for "idgen tag"; run idgen tag --help`, true},
		{[]string{"tag"}, "Available Commands", false},
		{[]string{"tag", "add", "--store", dsn}, "name the tag to create: idgen tag add TAG", true},
		{[]string{"tag", "step", "order", "--store", dsn}, "name the tag and its new step: idgen tag step TAG STEP", true},
		{[]string{"tag", "add", "bad tag", "--store", dsn}, "idgen: invalid tag", true},
		{[]string{"decode", leafID}, "days in the future: the ID was made with another layout or epoch; decode it with the --snowflake-layout", false},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--sequence-table", "leaf_alloc", "--store", dsn}, "--sequence-table leaf_alloc: cannot read table leaf_alloc in --store", true},
		{[]string{"version"}, "idgen ", false},
		{[]string{"--version"}, "idgen ", false},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a serve that starts is stopped
		out, err := exec.CommandContext(ctx, bin, tc.args...).CombinedOutput()
		cancel()
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
	t.Parallel()
	if testing.Short() {
		// Its own go build (for the -X version) and an idgen process:
		// the end-to-end tests' share of the whole run, as proctest's.
		t.Skip("builds and starts an idgen process: run without -short")
	}
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
