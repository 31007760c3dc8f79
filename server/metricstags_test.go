package server_test

import (
	"fmt"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

var seriesTag = regexp.MustCompile(`^(idgen_[a-z_]+)\{.*tag="([^"]*)".*\} (\S+)$`)

// tagSeries reads a scrape: per metric, the tag label values with their
// sample values.
func tagSeries(text string) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		m := seriesTag.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		if out[m[1]] == nil {
			out[m[1]] = map[string]float64{}
		}
		out[m[1]][m[2]] += v
	}
	return out
}

// Past the limit, tags share one label value, so the series stay bounded
// whatever the tag count, while every ID is still counted and a named tag
// keeps its series even when it comes last.
func TestMetrics_TagLimit(t *testing.T) {
	t.Parallel()
	const limit, tags, each = 5, 60, 3
	m, err := server.NewMetricsConfig(server.MetricsConfig{TagLimit: limit, Tags: []string{"pinned"}})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	alloc := newAllocator(t, st, segment.Options{AutoCreate: true, DefaultStep: 100, Observer: m})
	h, err := server.New(server.Config{Segment: alloc, Stats: alloc, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	names := []string{}
	for i := range tags {
		names = append(names, fmt.Sprintf("t%02d", i))
	}
	names = append(names, "pinned")
	for _, tag := range names {
		if a := do(t, "GET", ts.URL+"/id/"+tag+"?count="+strconv.Itoa(each), "", ""); a.status != 200 {
			t.Fatalf("GET /id/%s = %+v", tag, a)
		}
	}
	got := tagSeries(do(t, "GET", ts.URL+"/metrics", "", "").body)
	for _, metric := range []string{"idgen_ids_issued_total", "idgen_segment_loads_total", "idgen_segment_reserved_ids_total",
		"idgen_segment_empty_buffer_waits_total", "idgen_segment_regressions_total", "idgen_segment_buffered_ids"} {
		labels := got[metric]
		if len(labels) != limit+1 {
			t.Errorf("%s has %d tag values %v, want %d own and %s", metric, len(labels), keys(labels), limit, server.OtherTag)
		}
		for _, want := range []string{"pinned", "t00", "t03", server.OtherTag} {
			if _, ok := labels[want]; !ok {
				t.Errorf("%s lacks tag=%q: %v", metric, want, keys(labels))
			}
		}
		if _, ok := labels["t04"]; ok {
			t.Errorf("%s has tag t04, past the limit of %d with one named tag", metric, limit)
		}
	}
	issued := got["idgen_ids_issued_total"]
	var sum float64
	for _, v := range issued {
		sum += v
	}
	if want := float64((tags + 1) * each); sum != want || issued[server.OtherTag] != float64((tags-4)*each) {
		t.Errorf("issued: sum %v, %s %v; want %v and %v", sum, server.OtherTag, issued[server.OtherTag], want, (tags-4)*each)
	}
	if len(got["idgen_segment_step"]) != limit {
		t.Errorf("idgen_segment_step has %d tags, want the %d with series of their own", len(got["idgen_segment_step"]), limit)
	}
}

func keys(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestNewMetricsConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  server.MetricsConfig
		ok   bool
	}{
		{"zero", server.MetricsConfig{}, true},
		{"named only", server.MetricsConfig{TagLimit: -1, Tags: []string{"a", "b"}}, true},
		{"more named than the limit", server.MetricsConfig{TagLimit: 1, Tags: []string{"a", "b"}}, true},
		{"bad tag", server.MetricsConfig{Tags: []string{"a b"}}, false},
		{"the aggregate's own label", server.MetricsConfig{Tags: []string{server.OtherTag}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := server.NewMetricsConfig(tc.cfg); (err == nil) != tc.ok {
				t.Errorf("NewMetricsConfig(%+v) = %v, want ok=%v", tc.cfg, err, tc.ok)
			}
		})
	}
}
