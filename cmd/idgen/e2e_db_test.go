package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/dbtest"
	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/segment/segmenttest"
)

// Two real `idgen serve` processes share one database and are asked for
// IDs concurrently over HTTP: every ID must be distinct, and each
// process's IDs must strictly increase.
func TestServe_TwoInstancesShareADatabase(t *testing.T) {
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
			t.Logf("%s: 2 instances, 6 concurrent HTTP clients, %d IDs, 0 duplicates", k.Name, len(all))
		})
	}
}
