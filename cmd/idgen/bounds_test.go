package main_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
)

// scrape is what one GET /metrics shows about the server's footprint.
type scrape struct {
	series int   // sample lines
	bytes  int   // size of the answer
	heap   int64 // go_memstats_heap_inuse_bytes
}

func scrapeMetrics(t *testing.T, ctx context.Context, p *proctest.Proc, client *http.Client) scrape {
	t.Helper()
	status, body, err := p.Get(ctx, client, "/metrics")
	if err != nil || status != 200 {
		t.Fatalf("GET /metrics = %d %v", status, err)
	}
	s := scrape{bytes: len(body)}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		s.series++
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			s.heap = int64(f)
		}
	}
	return s
}

// flood asks a real server for IDs of n distinct tags, from 8 clients,
// and counts the answers by status.
func flood(t *testing.T, ctx context.Context, p *proctest.Proc, client *http.Client, route string, n int) map[int]int {
	t.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				status, _, err := p.Get(ctx, client, fmt.Sprintf("%st%05d", route, i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				codes[status]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return codes
}

// A flood of distinct tags, the cheapest thing an anonymous caller can
// send, must not grow what the server keeps: no metric series for tags
// that do not exist, and no more tags than --max-tags lets in. The count
// defaults to 3,000 requests per case; IDGEN_FLOOD_TAGS=20000 repeats the
// measurement quoted in docs/operations.md.
func TestServe_TagFloodIsBounded(t *testing.T) {
	t.Parallel()
	n := 3000
	if v, err := strconv.Atoi(os.Getenv("IDGEN_FLOOD_TAGS")); err == nil && v > 0 {
		n = v
	}
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	const maxTags = 50
	for _, tc := range []struct {
		name  string
		route string
		args  []string
		// most is how many series the flood may add: each tag the cap lets
		// in costs at most a few.
		most int
	}{
		{"auto-create off", "/id/", []string{"--auto-create-tags=false"}, 0},
		// Each tag let in: issued, loads, reserved IDs, waits, regressions,
		// buffered IDs and step, 7 series. Once: the 409's request
		// histogram (16) and its client-error counter.
		{"auto-create on", "/id/", []string{"--max-tags", strconv.Itoa(maxTags)}, 7*maxTags + 17},
		{"snowflake", "/snowflake/", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := "sqlite://" + filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".db")
			p := proctest.Serve(t, bin, []string{"IDGEN_STORE=" + dsn, "IDGEN_ACCESS_LOG=false"}, tc.args...)
			ctx := context.Background()
			client := &http.Client{Timeout: 10 * time.Second}
			// Warm up every route and status the flood will touch, so that
			// the baseline already holds their request series.
			p.Get(ctx, client, tc.route+"warm")
			p.Get(ctx, client, tc.route+"warm-unknown-"+strings.Repeat("x", 10))
			p.Get(ctx, client, "/metrics") // a scrape's own series appear from the second scrape on
			before := scrapeMetrics(t, ctx, p, client)
			start := time.Now()
			codes := flood(t, ctx, p, client, tc.route, n)
			took := time.Since(start)
			after := scrapeMetrics(t, ctx, p, client)
			t.Logf("%s, %d tags in %v: answers %v; series %d -> %d, /metrics %d -> %d bytes, heap in use %.1f -> %.1f MiB",
				tc.name, n, took.Round(time.Millisecond), codes, before.series, after.series, before.bytes, after.bytes,
				float64(before.heap)/(1<<20), float64(after.heap)/(1<<20))
			if grew := after.series - before.series; grew > tc.most {
				t.Errorf("%d distinct tags added %d series; want at most %d", n, grew, tc.most)
			}
			if codes[http.StatusInternalServerError]+codes[http.StatusServiceUnavailable] > 0 {
				t.Errorf("the flood got server errors: %v", codes)
			}
			if tc.most > 0 && codes[http.StatusOK] > maxTags {
				t.Errorf("%d tags issued IDs past --max-tags %d", codes[http.StatusOK], maxTags)
			}
		})
	}
}
