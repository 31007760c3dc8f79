package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/dbtest"
)

// Two real `idgen serve` processes share one database and are asked for
// IDs concurrently over HTTP: every ID must be distinct, and each
// process's IDs must strictly increase.
func TestServe_TwoInstancesShareADatabase(t *testing.T) {
	t.Parallel()
	for _, k := range []dbtest.Kind{dbtest.Postgres, dbtest.MySQL} {
		t.Run(k.Name, func(t *testing.T) {
			srv := dbtest.Start(t, k)
			bin := proctest.Binary(t, t.TempDir())
			env := []string{"IDGEN_STORE=" + srv.DSN}
			// Small steps make the instances interleave their ranges.
			a := proctest.Serve(t, bin, env, "--default-step", "20")
			b := proctest.Serve(t, bin, env, "--default-step", "20")

			client := &http.Client{Timeout: 30 * time.Second}
			ctx := context.Background()
			tag := segmenttest.UniqueTag("e2e")
			var mu sync.Mutex
			var all []int64
			var wg sync.WaitGroup
			for i, p := range []*proctest.Proc{a, b, a, b, a, b} {
				wg.Go(func() {
					var prev int64
					for range 300 {
						status, body, err := p.Get(ctx, client, "/id/"+tag)
						if err != nil || status != 200 {
							t.Errorf("client %d: %d %q %v", i, status, body, err)
							return
						}
						var r struct{ ID string }
						if err := json.Unmarshal([]byte(body), &r); err != nil {
							t.Error(err)
							return
						}
						id, _ := strconv.ParseInt(r.ID, 10, 64)
						if id <= prev {
							t.Errorf("client %d: %d after %d from one instance", i, id, prev)
						}
						prev = id
						mu.Lock()
						all = append(all, id)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if d := segmenttest.Duplicates(all); d != 0 || len(all) != 1800 {
				t.Fatalf("%d IDs with %d duplicates; want 1800 and 0", len(all), d)
			}
			// Both strategies from one binary: each instance leased its own
			// snowflake worker ID from the same database.
			workers := map[int64]bool{}
			var sf []int64
			for _, p := range []*proctest.Proc{a, b} {
				status, body, err := p.Get(ctx, client, "/snowflake/"+tag+"?count=500")
				if err != nil || status != 200 {
					t.Fatalf("snowflake IDs: %d %q %v", status, body, err)
				}
				var r struct{ IDs []string }
				if err := json.Unmarshal([]byte(body), &r); err != nil {
					t.Fatal(err)
				}
				var worker int64 = -1
				for _, v := range r.IDs {
					id, _ := strconv.ParseInt(v, 10, 64)
					sf = append(sf, id)
					p, err := snowflake.Decode(id)
					if err != nil || (worker >= 0 && p.WorkerID != worker) {
						t.Fatalf("ID %d decodes to %+v, %v", id, p, err)
					}
					worker = p.WorkerID
				}
				workers[worker] = true
			}
			if len(workers) != 2 || segmenttest.Duplicates(sf) != 0 {
				t.Fatalf("worker IDs %v and %d duplicates among %d snowflake IDs; want 2 distinct workers, 0 duplicates", workers, segmenttest.Duplicates(sf), len(sf))
			}

			// The CLI administers the same database.
			out, err := exec.Command(bin, "tag", "list", "--store", srv.DSN).CombinedOutput()
			if err != nil || !strings.Contains(string(out), tag) {
				t.Fatalf("idgen tag list on %s: %v\n%s", k.Name, err, out)
			}
			for _, p := range []*proctest.Proc{a, b} {
				if err := p.Stop(15 * time.Second); err != nil {
					t.Errorf("stop: %v\n%s", err, p.Log())
				}
			}
			t.Logf("%s: 2 instances, 6 concurrent HTTP clients, %d segment IDs and %d snowflake IDs from workers %v, 0 duplicates", k.Name, len(all), len(sf), workers)
		})
	}
}

// PostgreSQL's key=value DSN, which store/postgres documents, is served
// as PostgreSQL: no file named after it, IDs from the database, and the
// password nowhere in the log (issue 19 item 12).
func TestServe_PostgresKeyValueDSN(t *testing.T) {
	t.Parallel()
	srv := dbtest.Start(t, dbtest.Postgres)
	u, err := url.Parse(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	kv := fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=disable",
		u.Hostname(), u.Port(), u.User.Username(), pw, strings.TrimPrefix(u.Path, "/"))
	if sp := u.Query().Get("search_path"); sp != "" { // the test's schema on a shared server (dbtest)
		kv += " search_path=" + sp
	}
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=" + kv}, "--snowflake=false")
	client := &http.Client{Timeout: 30 * time.Second}
	tag := segmenttest.UniqueTag("kv")
	if status, body, err := p.Get(context.Background(), client, "/id/"+tag); err != nil || status != 200 || !strings.Contains(body, `"id":"1"`) {
		t.Fatalf("GET /id/%s = %d %q %v", tag, status, body, err)
	}
	if err := p.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.Log(), "password="+pw) || !strings.Contains(p.Log(), "password=xxxxx") || !strings.Contains(p.Log(), "new_store=false") {
		t.Fatalf("startup log shows the password or lacks the masked DSN:\n%s", p.Log())
	}
	out, err := exec.Command(bin, "tag", "list", "--store", kv).CombinedOutput()
	if err != nil || !strings.Contains(string(out), tag) {
		t.Fatalf("tag list over the key=value DSN: %v\n%s", err, out)
	}
	if left, _ := os.ReadDir("."); slices.ContainsFunc(left, func(e os.DirEntry) bool { return strings.Contains(e.Name(), "password") }) {
		t.Fatalf("a file named after the DSN was created")
	}
}
