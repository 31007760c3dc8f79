package server

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// scrape returns m's /metrics text.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	return w.Body.String()
}

// Cached children are the vectors' own series: counts through the cache
// land where WithLabelValues would put them, past the cache's bound too.
func TestSeriesCache_SameSeries(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	for i := range 3 {
		m.issuedCounter("order", ModeSegment).Add(float64(i + 1))
	}
	m.issuedCounter("order", "range").Add(100)
	m.issuedCounter("invoice", ModeSegment).Inc()
	m.issuedCounter("order", ModeSegment).Inc() // found in the cache now
	text := scrape(t, m)
	for _, want := range []string{
		`idgen_ids_issued_total{mode="segment",tag="order"} 7` + "\n",
		`idgen_ids_issued_total{mode="range",tag="order"} 100` + "\n",
		`idgen_ids_issued_total{mode="segment",tag="invoice"} 1` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// More status codes on one route than the cache keeps: each one is
	// still its own series with its own count.
	codes := maxCachedPerKey + 8
	for c := range codes {
		for range c + 1 {
			m.requestObserver("/id/:tag", "GET", 200+c).Observe(0.001)
		}
	}
	if n := len(*m.cache.route("/id/:tag").list.Load()); n != maxCachedPerKey {
		t.Errorf("cached %d children of one route, want the bound %d", n, maxCachedPerKey)
	}
	text = scrape(t, m)
	for c := range codes {
		want := `idgen_http_request_duration_seconds_count{code="` + strconv.Itoa(200+c) +
			`",method="GET",route="/id/:tag"} ` + strconv.Itoa(c+1) + "\n"
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
