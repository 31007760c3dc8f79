package server_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

// TestMetrics_ScrapeTimeSeries checks the series read at scrape time
// (buffers, readiness) and the ones that exist before anything fails, so
// that alerts on increase() see their first event.
func TestMetrics_ScrapeTimeSeries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		ready error
		want  []string
	}{
		{"ready", nil, []string{
			`idgen_segment_buffered_ids{tag="order"} 995`,
			`idgen_segment_step{tag="order"} 1000`,
			`idgen_ready 1`,
			`idgen_snowflake_enabled 0`,
			`idgen_store_errors_total{op="reserve"} 0`,
			`idgen_segment_regressions_total{tag="order"} 0`,
		}},
		{"not ready", errors.New("store down"), []string{`idgen_ready 0`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			m := server.NewMetrics()
			alloc := newAllocator(t, st, segment.Options{AutoCreate: true, DefaultStep: 1000, FixedStep: true, Observer: m})
			h, err := server.New(server.Config{Segment: alloc, Stats: alloc, Metrics: m,
				Ready: func(context.Context) error { return tc.ready }})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(h)
			t.Cleanup(ts.Close)
			do(t, "GET", ts.URL+"/id/order?count=5", "", "")
			body := do(t, "GET", ts.URL+"/metrics", "", "").body
			for _, want := range tc.want {
				if !strings.Contains(body, want+"\n") {
					t.Errorf("/metrics lacks %s", want)
				}
			}
		})
	}
}
