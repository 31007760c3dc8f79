package main_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/readable"
)

// runCLI runs bin with args and env added, and returns its combined output
// and exit error.
func runCLI(bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(context.Background(), bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// keygen --out creates a 0600 file and never overwrites one; serve
// refuses a key file others can read, warns about one its group can,
// refuses --opaque-key on its command line, refuses a key without
// --metrics-token, and refuses a key or --auto-create-opaque with
// --sequence-table leaf_alloc.
func TestOpaque_KeyHandling(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	db := "sqlite://" + filepath.Join(dir, "idgen.db")
	keyFile := filepath.Join(dir, "opaque.key")

	out, err := runCLI(bin, nil, "opaque", "keygen", "--out", keyFile)
	if err != nil || !strings.Contains(out, "fingerprint ff1v2:") {
		t.Fatalf("keygen --out: %v\n%s", err, out)
	}
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("keygen --out made %v (%v), want mode 0600", fi.Mode(), err)
	}
	b, _ := os.ReadFile(keyFile)
	if _, err := opaque.ParseKey(string(b)); err != nil || strings.Contains(out, strings.TrimSpace(string(b))) {
		t.Fatalf("the key file holds no key (%v), or the key was printed:\n%s", err, out)
	}
	if out, err := runCLI(bin, nil, "opaque", "keygen", "--out", keyFile); err == nil || !strings.Contains(out, "exists") {
		t.Fatalf("keygen --out over an existing file: %v\n%s", err, out)
	}
	if b2, _ := os.ReadFile(keyFile); string(b2) != string(b) {
		t.Fatal("keygen --out changed an existing key file")
	}

	env := []string{"IDGEN_STORE=" + db, "IDGEN_METRICS_TOKEN=" + e2eMetrics}
	serve := func(env []string, args ...string) (string, error) {
		// Each refusal comes before the listener serves: a timeout
		// guards a serve that starts after all.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, tc := range []struct {
		name string
		mode os.FileMode
		env  []string
		args []string
		want string
	}{
		{"world-readable key file", 0o644, env, []string{"--opaque-key-file", keyFile}, "readable by every user (mode 0644): run chmod 600"},
		{"key on the command line", 0o600, env, []string{"--opaque-key", opaqueKeyA}, "--opaque-key on the command line is refused"},
		{"key without a metrics token", 0o600, []string{"IDGEN_STORE=" + db}, []string{"--opaque-key-file", keyFile}, "an opaque key needs --metrics-token"},
		{"key with leaf_alloc", 0o600, append(env, "IDGEN_OPAQUE_KEY="+opaqueKeyA), []string{"--sequence-table", "leaf_alloc"}, "opaque tags are refused with --sequence-table leaf_alloc"},
		{"auto-create-opaque with leaf_alloc", 0o600, env, []string{"--sequence-table", "leaf_alloc", "--auto-create-opaque"}, "opaque tags are refused with --sequence-table leaf_alloc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.Chmod(keyFile, tc.mode); err != nil {
				t.Fatal(err)
			}
			out, err := serve(tc.env, tc.args...)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !strings.Contains(out, tc.want) || strings.Contains(out, opaqueKeyA) || strings.Contains(out, string(b)) {
				t.Fatalf("serve %v: %v, want a refusal saying %q and never the key:\n%s", tc.args, err, tc.want, out)
			}
		})
	}
	// The same refusal of the command line in the other commands.
	if out, err := runCLI(bin, nil, "opaque", "decode", "order", "5", "--opaque-key", opaqueKeyA); err == nil || !strings.Contains(out, "--opaque-key on the command line is refused") {
		t.Fatalf("opaque decode --opaque-key: %v\n%s", err, out)
	}

	// Readable by the group: served, with a warning in the log.
	if err := os.Chmod(keyFile, 0o640); err != nil {
		t.Fatal(err)
	}
	p := proctest.Serve(t, bin, env, "--opaque-key-file", keyFile)
	if !strings.Contains(p.Log(), "is readable by its group (mode 0640)") {
		t.Fatalf("no warning about a group-readable key file:\n%s", p.Log())
	}
}

// An anonymous /metrics scrape of an instance holding an opaque key is
// refused, so it shows no series of an opaque tag; the token holder sees
// them (which shows the scrape would have named the tag).
func TestOpaque_MetricsHideVolume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db"),
		"IDGEN_METRICS_TOKEN=" + e2eMetrics, "IDGEN_OPAQUE_KEY=" + opaqueKeyA, "IDGEN_ADMIN_TOKEN=" + e2eAdmin})
	if st, body := send(t, "POST", p.URL+"/admin/tags", e2eAdmin, `{"tag":"secret","step":100,"opaque":true}`); st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	for range 37 {
		if st, body := send(t, "GET", p.URL+"/id/secret", "", ""); st != 200 {
			t.Fatalf("GET /id/secret: %d %s", st, body)
		}
	}
	st, body := send(t, "GET", p.URL+"/metrics", "", "")
	if st != http.StatusUnauthorized && st != http.StatusForbidden || strings.Contains(body, "secret") || strings.Contains(body, "idgen_ids_issued_total") {
		t.Fatalf("anonymous /metrics: %d, want 401 or 403 with no series:\n%s", st, body)
	}
	st, body = send(t, "GET", p.URL+"/metrics", e2eMetrics, "")
	if st != 200 || !strings.Contains(body, `idgen_ids_issued_total{mode="segment",tag="secret"} 37`) {
		t.Fatalf("/metrics with the token: %d, want the tag's series:\n%.2000s", st, body)
	}
}

// Decoding tells the truth, over HTTP and in the CLI: 404 for a tag that
// does not exist, 409 for a plain one, the prefixed form accepted, and a
// counter at or above max_id flagged as never issued.
func TestOpaque_DecodeTellsTheTruth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	db := "sqlite://" + filepath.Join(dir, "idgen.db")
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=" + db, "IDGEN_METRICS_TOKEN=" + e2eMetrics,
		"IDGEN_OPAQUE_KEY=" + opaqueKeyA, "IDGEN_ADMIN_TOKEN=" + e2eAdmin}, "--default-step", "10")
	for _, body := range []string{`{"tag":"sec","step":10,"opaque":true}`, `{"tag":"plain","step":10}`} {
		if st, b := send(t, "POST", p.URL+"/admin/tags", e2eAdmin, body); st != 201 {
			t.Fatalf("create %s: %d %s", body, st, b)
		}
	}
	st, body := send(t, "GET", p.URL+"/id/sec", "", "")
	if st != 200 {
		t.Fatalf("GET /id/sec: %d %s", st, body)
	}
	issued := parseAnyID(t, strings.Split(strings.Split(body, `"id":"`)[1], `"`)[0])
	key, _ := opaque.ParseKey(opaqueKeyA)
	never, _ := key.Encode("sec", 1_000_000) // far above max_id
	prefixed, _ := readable.Encode("sec", issued)
	otherPrefixed, _ := readable.Encode("plain", issued)
	id := strconv.FormatInt(issued, 10)

	for _, tc := range []struct {
		name, path string
		status     int
		want       string // code, or the parts of the 200 body, |-separated
	}{
		{"issued", "/admin/opaque/sec/" + id, 200, `"counter":"1",|"issued":true`},
		{"prefixed", "/admin/opaque/sec/" + prefixed, 200, `"counter":"1",|"issued":true`},
		{"never issued", "/admin/opaque/sec/" + strconv.FormatInt(never, 10), 200, `"counter":"1000000",|"issued":false`},
		{"no such tag", "/admin/opaque/nosuch/" + id, 404, "tag_not_found"},
		{"plain tag", "/admin/opaque/plain/" + id, 409, "tag_not_opaque"},
		{"another tag's prefixed ID", "/admin/opaque/sec/" + otherPrefixed, 400, "invalid_id"},
		{"garbage", "/admin/opaque/sec/xyz", 400, "invalid_id"},
	} {
		t.Run("http "+tc.name, func(t *testing.T) {
			st, body := send(t, "GET", p.URL+tc.path, e2eAdmin, "")
			if st != tc.status {
				t.Fatalf("GET %s: %d %s, want %d", tc.path, st, body, tc.status)
			}
			if st != 200 && errorCode(body) != tc.want {
				t.Fatalf("GET %s: %s, want %s", tc.path, body, tc.want)
			}
			for _, part := range strings.Split(tc.want, "|") {
				if st == 200 && !strings.Contains(body, part) {
					t.Fatalf("GET %s: %s, want %s", tc.path, body, part)
				}
			}
		})
	}

	env := []string{"IDGEN_OPAQUE_KEY=" + opaqueKeyA}
	for _, tc := range []struct {
		name    string
		args    []string
		ok      bool
		wantOut string
	}{
		{"issued", []string{"sec", id}, true, "counter 1 "},
		{"prefixed", []string{"sec", prefixed}, true, "counter 1 "},
		{"never issued", []string{"sec", strconv.FormatInt(never, 10)}, false, "never issued"},
		{"no such tag", []string{"nosuch", id}, false, "tag not found"},
		{"plain tag", []string{"plain", id}, false, "not opaque"},
		{"another tag's prefixed ID", []string{"sec", otherPrefixed}, false, `is an ID of tag "plain"`},
	} {
		t.Run("cli "+tc.name, func(t *testing.T) {
			out, err := runCLI(bin, env, append([]string{"opaque", "decode", "--store", db}, tc.args...)...)
			if (err == nil) != tc.ok || !strings.Contains(out, tc.wantOut) {
				t.Fatalf("opaque decode %v: %v, want ok=%v and %q:\n%s", tc.args, err, tc.ok, tc.wantOut, out)
			}
		})
	}
}
