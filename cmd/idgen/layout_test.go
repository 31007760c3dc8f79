package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/segment/segmenttest"
)

// The layouts and epochs of these tests, as the error messages name them.
const (
	stdLayout   = "41/10/12 epoch 2026-01-01T00:00:00Z"
	laterEpoch  = "2026-01-01T00:00:03Z" // 3000 ms after the default
	laterLayout = "41/10/12 epoch " + laterEpoch
	wideLayout  = "41/11/11 epoch 2026-01-01T00:00:00Z"
)

// snowflakeIDs fetches IDs from p with two clients for d, once p answers:
// after a relayout it is not ready until the new layout's floor.
func snowflakeIDs(t *testing.T, p *proctest.Proc, d time.Duration) []int64 {
	t.Helper()
	ctx := context.Background()
	client := &http.Client{Timeout: 10 * time.Second}
	if err := testtime.WaitFor(30*time.Second, 50*time.Millisecond, func() error {
		status, _, err := p.Get(ctx, client, "/snowflake/layout")
		if err == nil && status != 200 {
			err = fmt.Errorf("status %d", status)
		}
		return err
	}); err != nil {
		t.Fatalf("%s not serving snowflake IDs: %v\n%s", p.URL, err, p.Log())
	}
	var mu sync.Mutex
	var ids []int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range 2 {
		wg.Go(func() {
			for time.Now().Before(end) {
				status, body, err := p.Get(ctx, client, "/snowflake/layout?count=1000")
				if err != nil || status != 200 {
					t.Errorf("GET /snowflake/layout?count=1000 = %d %q %v", status, body, err)
					return
				}
				var many struct{ IDs []string }
				if err := json.Unmarshal([]byte(body), &many); err != nil {
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
	return ids
}

// refused runs `idgen serve args…`, which must exit non-zero before
// serving with an output that says each of want.
func refused(t *testing.T, bin string, env []string, want []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil || strings.Contains(string(out), "serving addr=") {
		t.Fatalf("serve %v started, or did not exit (err %v):\n%s", args, err, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("serve %v: output lacks %q:\n%s", args, w, out)
		}
	}
}

func run(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("idgen %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// The measured hole: run 1 with the default epoch, run 2 on the same file
// with the epoch moved later, both on worker 0. Now run 2 refuses to start
// until `idgen snowflake relayout`, whose floor then puts every new ID
// above the old ones; a second relayout changes the bit widths the same
// way, and the retired layouts are refused from then on.
func TestServe_SnowflakeEpochChangeNeedsARelayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	env := []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")}

	p1 := proctest.Serve(t, bin, env)
	// Long enough that, without the floor, run 2's first seconds would
	// repeat run 1's last ones.
	ids1 := snowflakeIDs(t, p1, 4*time.Second)
	if err := p1.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}

	refused(t, bin, env, []string{"layout mismatch", stdLayout, laterLayout, "--worker-range",
		"idgen snowflake relayout --snowflake-layout 41/10/12 --snowflake-epoch " + laterEpoch}, "--snowflake-epoch", laterEpoch)

	out := run(t, bin, env, "snowflake", "relayout", "--snowflake-epoch", laterEpoch)
	if !strings.Contains(out, "snowflake layout now "+laterLayout) {
		t.Fatalf("relayout:\n%s", out)
	}
	p2 := proctest.Serve(t, bin, env, "--snowflake-epoch", laterEpoch)
	ids2 := snowflakeIDs(t, p2, 2*time.Second)
	if err := p2.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	refused(t, bin, env, []string{"layout mismatch", stdLayout + " on worker IDs 0-1023, retired at", "none is left for " + stdLayout})

	run(t, bin, env, "snowflake", "relayout", "--snowflake-layout", "41/11/11")
	p3 := proctest.Serve(t, bin, env, "--snowflake-layout", "41/11/11")
	ids3 := snowflakeIDs(t, p3, time.Second)

	all := slices.Concat(ids1, ids2, ids3)
	if d := segmenttest.Duplicates(all); d != 0 {
		t.Fatalf("%d duplicates among %d IDs of three layouts", d, len(all))
	}
	if slices.Min(ids2) <= slices.Max(ids1) || slices.Min(ids3) <= slices.Max(ids2) {
		t.Errorf("each layout's IDs should start above the last: %d..%d, %d..%d, %d..%d",
			slices.Min(ids1), slices.Max(ids1), slices.Min(ids2), slices.Max(ids2), slices.Min(ids3), slices.Max(ids3))
	}
	layouts := run(t, bin, env, "snowflake", "layout")
	if strings.Count(layouts, "retired at") != 2 || !strings.Contains(layouts, wideLayout) {
		t.Errorf("snowflake layout:\n%s", layouts)
	}
	t.Logf("%d, %d and %d IDs in %s, %s and %s: 0 duplicates", len(ids1), len(ids2), len(ids3), stdLayout, laterLayout, wideLayout)
}

// The other measured hole: serve (41/10/12) beside serve --snowflake-layout
// 41/11/11 on one store. The second refuses, and no worker range of
// 41/11/11 is left, since the first leases from all of 0-1023. So does a
// static --worker-id with another epoch.
func TestServe_SnowflakeLayoutBesideAnotherRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	env := []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")}
	p := proctest.Serve(t, bin, env)
	refused(t, bin, env, []string{"layout mismatch", stdLayout, wideLayout, "none is left for " + wideLayout},
		"--snowflake-layout", "41/11/11")
	// A static worker ID is checked the same way.
	refused(t, bin, env, []string{"layout mismatch", stdLayout, laterLayout + " on worker IDs 5-5"},
		"--worker-id", "5", "--snowflake-epoch", laterEpoch)
	if ids := snowflakeIDs(t, p, 200*time.Millisecond); len(ids) == 0 {
		t.Fatal("the first instance stopped serving")
	}
}

// Other layouts beside a running one on worker IDs whose IDs cannot meet
// its, 41/10/12 on 0-255: 41/11/11 on 1024-2047, whose IDs carry 512-1023
// in bits 12-21 where 41/10/12's carry their worker ID, and another epoch
// on 256-511. All three serve at once with 0 duplicates; 41/11/11 on
// every worker ID is refused, and told which range is free.
func TestServe_SnowflakeLayoutsOnDisjointWorkerRanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	env := []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")}
	procs := []*proctest.Proc{
		proctest.Serve(t, bin, env, "--worker-range", "0-255"),
		proctest.Serve(t, bin, env, "--snowflake-layout", "41/11/11", "--worker-range", "1024-2047"),
		proctest.Serve(t, bin, env, "--snowflake-epoch", laterEpoch, "--worker-range", "256-511"),
	}
	refused(t, bin, env, []string{"layout mismatch", stdLayout, wideLayout, "1024-2047 is free for " + wideLayout},
		"--snowflake-layout", "41/11/11")
	ids := make([][]int64, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { ids[i] = snowflakeIDs(t, p, 2*time.Second) })
	}
	wg.Wait()
	all := slices.Concat(ids...)
	if d := segmenttest.Duplicates(all); d != 0 {
		t.Fatalf("%d duplicates among %d IDs of three layouts on disjoint worker ranges", d, len(all))
	}
	t.Logf("%d, %d and %d IDs at once from %s, %s and %s: 0 duplicates", len(ids[0]), len(ids[1]), len(ids[2]), stdLayout, wideLayout, laterLayout)
}
