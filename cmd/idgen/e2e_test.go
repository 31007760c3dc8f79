package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/segment/segmenttest"
)

// The quick start, for real: a built binary, no flags but a port, a real
// SQLite file, real HTTP, and a graceful SIGTERM that hands the unused
// range back.
func TestServe_ZeroConfigEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	dsn := "sqlite://" + filepath.Join(dir, "idgen.db")
	env := []string{"IDGEN_STORE=" + dsn} // configured the way containers are: by environment
	p := proctest.Serve(t, bin, env)
	ctx := context.Background()
	client := &http.Client{Timeout: 10 * time.Second}

	status, body, err := p.Get(ctx, client, "/id/order")
	if err != nil || status != 200 {
		t.Fatalf("GET /id/order = %d %q %v", status, body, err)
	}
	var one struct{ Tag, ID string }
	if err := json.Unmarshal([]byte(body), &one); err != nil || one.Tag != "order" || one.ID != "1" {
		t.Fatalf("first answer %q, want tag order and id \"1\"", body)
	}

	// Concurrent clients: every ID distinct.
	var mu sync.Mutex
	var ids []int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				s, b, err := p.Get(ctx, client, "/id/order?count=10")
				if err != nil || s != 200 {
					t.Errorf("GET = %d %q %v", s, b, err)
					return
				}
				var many struct{ IDs []string }
				if err := json.Unmarshal([]byte(b), &many); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, v := range many.IDs {
					n, _ := strconv.ParseInt(v, 10, 64)
					ids = append(ids, n)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if d := segmenttest.Duplicates(append(ids, 1)); d != 0 || len(ids) != 4000 {
		t.Fatalf("%d IDs with %d duplicates, want 4000 and 0", len(ids), d)
	}

	if s, _, _ := p.Get(ctx, client, "/readyz"); s != 200 {
		t.Fatalf("/readyz = %d", s)
	}
	if err := p.Stop(15 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, p.Log())
	}
	// 4001 IDs were handed out; SIGTERM gave the rest of the segment back.
	out, err := exec.Command(bin, "tag", "list", "--store", dsn).CombinedOutput()
	if err != nil {
		t.Fatalf("tag list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "order  4002") {
		t.Fatalf("after shutdown the next free ID should be 4002:\n%s", out)
	}
}

func TestCLI_Tags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	dsn := "sqlite://" + filepath.Join(dir, "cli.db")
	run := func(args ...string) (string, error) {
		out, err := exec.Command(bin, append(args, "--store", dsn)...).CombinedOutput()
		return string(out), err
	}
	for _, tc := range []struct {
		args    []string
		wantErr bool
		want    string
	}{
		{[]string{"migrate"}, false, "schema at version"},
		{[]string{"tag", "add", "user", "--step", "50", "--start", "1000"}, false, "created user"},
		{[]string{"tag", "add", "user"}, true, "tag already exists"},
		{[]string{"tag", "add", "bad tag"}, true, "invalid tag"},
		{[]string{"tag", "add", "neg", "--step", "0"}, true, "invalid step"},
		{[]string{"tag", "step", "user", "70"}, false, "user: step 70"},
		{[]string{"tag", "step", "ghost", "70"}, true, "tag not found"},
		{[]string{"tag", "list"}, false, "user  1000"},
		{[]string{"tag", "add", "top", "--start", "9223372036854775000"}, true, "invalid step or start: start 9223372036854775000 is not from 1"},
		{[]string{"tag", "add", "zero", "--start", "0"}, true, "invalid step or start: start 0 is not from 1 to 9223372036854774807 (the int64 limit less one step); IDs are never 0"},
		{[]string{"tag", "add", "other", "--start", "5"}, false, "created other"},
		{[]string{"tag", "bump", "--all", "--by", "100"}, false, "other: next_id 105"},
		{[]string{"tag", "list"}, false, "other  105"},
		// --all raises the tag floor too: a tag created afterwards, such
		// as one whose creation the restore lost, starts above it.
		{[]string{"tag", "add", "late", "--start", "3"}, false, "created late: first ID 103, step 1000 (--start 3 plus the store's tag floor 100"},
		{[]string{"tag", "list"}, false, "late   103"},
		{[]string{"tag", "bump", "user", "--to", "500"}, false, "user: already at or above 500"},
		{[]string{"tag", "bump", "user", "--to", "5000"}, false, "user: next_id 5000"},
		{[]string{"tag", "bump", "user"}, true, "exactly one of --by N or --to N"},
		{[]string{"tag", "bump", "--by", "5"}, true, "name the tags to bump, or pass --all"},
		{[]string{"tag", "list"}, false, "user   5000"},
		{[]string{"decode", "123456789012345"}, false, `"worker_id":221`},
		{[]string{"decode", strconv.FormatInt((time.Now().UnixMilli()-1288834974657)<<22|5<<12|7, 10), "--snowflake-layout", "leaf"}, false, `"worker_id":5}`}, // no warning
		{[]string{"decode", "order_BukQL3x"}, false, `"id":"123456789"`},
		{[]string{"decode", "order_BukQL3y"}, true, "checksum"},
		{[]string{"health", "--url", "http://127.0.0.1:1/readyz"}, true, "connection refused"},
	} {
		out, err := run(tc.args...)
		if (err != nil) != tc.wantErr || !strings.Contains(out, tc.want) {
			t.Errorf("idgen %v: err %v, output %q; want error=%v and %q", tc.args, err, out, tc.wantErr, tc.want)
		}
	}
}
