package main_test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
)

// A static --worker-id is held in worker_node like a lease: it cannot be
// given to a process while another holds it, leased processes never take
// it, and a static process's IDs never collide with a leased one's.
func TestServe_StaticWorkerIDIsHeldLikeALease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	env := []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")}
	ctx := context.Background()
	client := &http.Client{Timeout: 10 * time.Second}

	leased := proctest.Serve(t, bin, env)
	if !strings.Contains(leased.Log(), "worker_id=0") {
		t.Fatalf("first leased process did not get worker 0:\n%s", leased.Log())
	}
	// The static process asks for the worker ID the leased one holds.
	cmdCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cmdCtx, bin, "serve", "--addr", "127.0.0.1:0", "--worker-id", "0")
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--worker-id 0") || !strings.Contains(string(out), "is held by") {
		t.Fatalf("serve --worker-id 0 beside a live lease on worker 0: err %v, output:\n%s", err, out)
	}
	static := proctest.Serve(t, bin, env, "--worker-id", "1")
	// A new leased process skips the pinned worker 1.
	leased2 := proctest.Serve(t, bin, env)
	if !strings.Contains(leased2.Log(), "worker_id=2") {
		t.Fatalf("second leased process did not skip the static worker 1:\n%s", leased2.Log())
	}
	seen := map[string]string{}
	for _, p := range []*proctest.Proc{leased, static, leased2} {
		for range 200 {
			status, body, err := p.Get(ctx, client, "/snowflake/order")
			if err != nil || status != 200 {
				t.Fatalf("GET /snowflake/order = %d %q %v", status, body, err)
			}
			if prev, dup := seen[body]; dup {
				t.Fatalf("%s handed out by %s and %s", body, prev, p.URL)
			}
			seen[body] = p.URL
		}
	}
	// The static process restarts on its own worker ID.
	if err := static.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	again := proctest.Serve(t, bin, env, "--worker-id", "1")
	if !strings.Contains(again.Log(), "worker_id=1") {
		t.Fatalf("static restart:\n%s", again.Log())
	}
	t.Logf("%d snowflake IDs from a leased, a static and a second leased process, 0 duplicates", len(seen))
}
