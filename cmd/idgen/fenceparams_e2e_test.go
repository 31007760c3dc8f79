package main_test

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/sqlite"
)

// The fleet's fence parameters are the store's: a second instance with
// another --lease-ttl is refused beside the first, naming both values,
// and a one-shot `idgen tag bump` after a failover fences with the
// fleet's --lease-ttl and --fence-margin, not its own defaults; the
// fleet then goes on without fencing again (docs/fencing.md, F4).
func TestServe_FenceParametersAreTheFleets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	path := filepath.Join(dir, "idgen.db")
	env := []string{"IDGEN_STORE=sqlite://" + path}
	p := proctest.Serve(t, bin, env, "--access-log=false", "--lease-ttl", "10m", "--fence-margin", "7777")
	tag := segmenttest.UniqueTag("fleet")
	run(t, bin, env, "tag", "add", tag)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	other := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--lease-ttl", "30s")
	other.Env = append(other.Environ(), env...)
	out, err := other.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--lease-ttl 10m0s and --fence-margin 7777") || !strings.Contains(string(out), "--lease-ttl 30s") {
		t.Fatalf("a second instance with --lease-ttl 30s beside the fleet: %v\n%s", err, out)
	}

	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var before int64
	if err := st.DB().QueryRowContext(ctx, "SELECT max_id FROM id_sequence WHERE biz_tag = ?", tag).Scan(&before); err != nil {
		t.Fatal(err)
	}
	// The failover: the file is another store's history now.
	if _, err := st.DB().ExecContext(ctx, "UPDATE idgen_fence SET store_id = 'another-file' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	run(t, bin, env, "tag", "bump", tag, "--by", "1")
	var fences, until, at, after int64
	if err := st.DB().QueryRowContext(ctx, "SELECT fences, fence_until, fenced_at FROM idgen_fence WHERE id = 1").Scan(&fences, &until, &at); err != nil {
		t.Fatal(err)
	}
	if err := st.DB().QueryRowContext(ctx, "SELECT max_id FROM id_sequence WHERE biz_tag = ?", tag).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if hold := time.Duration(until-at) * time.Millisecond; fences != 1 || hold < 10*time.Minute {
		t.Fatalf("after tag bump: %d fences, holding %v; want 1, at least the fleet's --lease-ttl 10m", fences, hold)
	}
	if moved := after - before; moved < 2*7777 {
		t.Fatalf("the fence moved the tag by %d, want at least two failovers of the fleet's margin 7777", moved)
	}

	// The fleet reserves on without a fence of its own.
	resp, err := http.Get(p.URL + "/id/" + tag)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /id/%s after the fence: %d %s", tag, resp.StatusCode, body)
	}
	if err := st.DB().QueryRowContext(ctx, "SELECT fences FROM idgen_fence WHERE id = 1").Scan(&fences); err != nil || fences != 1 {
		t.Fatalf("after the fleet's reservation: %d fences (%v), want still 1", fences, err)
	}
}
