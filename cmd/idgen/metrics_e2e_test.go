package main_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/internal/testtime"
)

var tagSample = regexp.MustCompile(`^(idgen_[a-z_]+)\{.*tag="([^"]*)".*\} (\S+)$`)

// A real idgen serve with many more tags than --metrics-tag-limit: each
// per-tag metric carries at most the limit's tags and ~other, a named tag
// keeps its own series although it comes last, and the issued counters
// still add up to every ID handed out.
func TestServe_MetricsTagLimit(t *testing.T) {
	t.Parallel()
	const limit, tags, each = 10, 300, 2
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	p := proctest.Serve(t, bin, nil, "--store", "sqlite://"+filepath.Join(dir, "m.db"), "--snowflake=false",
		"--access-log=false", "--default-step", "10", "--metrics-tag-limit", strconv.Itoa(limit), "--metrics-tags", "vip")

	names := make(chan string, tags+1)
	for i := range tags {
		names <- fmt.Sprintf("tag%03d", i)
	}
	close(names)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for n := range names {
				// A 503 hands out nothing and says to retry: on a loaded
				// machine a new tag's first reservation can wait out the
				// store timeout, as it would in production.
				var a answer
				testtime.Until(15*time.Second, 200*time.Millisecond, func() bool {
					a = get(t, p, "/id/"+n+"?count="+strconv.Itoa(each))
					return a.status != http.StatusServiceUnavailable
				})
				if a.status != 200 {
					t.Errorf("GET /id/%s = %+v", n, a)
				}
			}
		})
	}
	wg.Wait()
	if a := get(t, p, "/id/vip?count="+strconv.Itoa(each)); a.status != 200 {
		t.Fatalf("GET /id/vip = %+v", a)
	}

	scrape := get(t, p, "/metrics").body
	byMetric := map[string]map[string]float64{}
	for _, line := range strings.Split(scrape, "\n") {
		m := tagSample.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		if byMetric[m[1]] == nil {
			byMetric[m[1]] = map[string]float64{}
		}
		byMetric[m[1]][m[2]] += v
	}
	for _, metric := range []string{"idgen_ids_issued_total", "idgen_segment_loads_total", "idgen_segment_reserved_ids_total",
		"idgen_segment_empty_buffer_waits_total", "idgen_segment_regressions_total", "idgen_segment_buffered_ids", "idgen_segment_step"} {
		values := byMetric[metric]
		if len(values) == 0 || len(values) > limit+1 {
			t.Errorf("%s has %d tag values, want 1 to %d (the limit and ~other)", metric, len(values), limit+1)
		}
		if _, ok := values["vip"]; !ok {
			t.Errorf("%s lacks the named tag vip", metric)
		}
	}
	var sum float64
	for _, v := range byMetric["idgen_ids_issued_total"] {
		sum += v
	}
	if want := float64((tags + 1) * each); sum != want || byMetric["idgen_ids_issued_total"]["~other"] < float64((tags-limit)*each) {
		t.Errorf("idgen_ids_issued_total sums to %v with ~other %v; want %v, ~other at least %d",
			sum, byMetric["idgen_ids_issued_total"]["~other"], want, (tags-limit)*each)
	}
	t.Logf("%d tags, --metrics-tag-limit %d: %d bytes of /metrics, %d samples with a tag label",
		tags+1, limit, len(scrape), strings.Count(scrape, `tag="`))

	// Bad values stop serve before it touches the store.
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--metrics-tag-limit", "-1"}, "--metrics-tag-limit must be 0 to 10000"},
		{[]string{"--metrics-tag-limit", "1", "--metrics-tags", "a,b"}, "more than --metrics-tag-limit 1"},
		{[]string{"--metrics-tags", "a b"}, `--metrics-tags: metrics tag "a b"`},
	} {
		store := filepath.Join(dir, "never.db")
		out, err := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--store", "sqlite://" + store}, tc.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.says) {
			t.Errorf("serve %v = %v %s, want an error saying %q", tc.args, err, out, tc.says)
		}
		if _, err := os.Stat(store); err == nil {
			t.Errorf("serve %v created %s before refusing its flags", tc.args, store)
		}
	}
}
