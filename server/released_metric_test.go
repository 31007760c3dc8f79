package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

// TestMetrics_ReleasedIDs: idgen_segment_released_ids_total counts the
// IDs the store really took back, on a real SQLite store: a range's tail
// through the release route (source client), the unused rest of the
// segments on Close (source shutdown); a refused hand-back counts
// nothing. The next allocator starting at the next ID shows that the
// counted IDs did go back.
func TestMetrics_ReleasedIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	m := server.NewMetrics()
	opts := segment.Options{AutoCreate: true, DefaultStep: 100, FixedStep: true, PrefetchRatio: 0.5}
	withMetrics := opts
	withMetrics.Observer = m
	alloc := newAllocator(t, st, withMetrics)
	h, err := server.New(server.Config{Segment: alloc, Ranges: alloc, Stats: alloc, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	series := func(tag, source string) string {
		return `idgen_segment_released_ids_total{source="` + source + `",tag="` + tag + `"}`
	}
	metrics := func() string { return do(t, "GET", ts.URL+"/metrics", "", "").body }

	// order and invoice hold [1,101) with 1 handed out.
	for _, tag := range []string{"order", "invoice"} {
		if a := do(t, "GET", ts.URL+"/id/"+tag, "", ""); a.status != 200 || !strings.Contains(a.body, `"id":"1"`) {
			t.Fatalf("GET /id/%s: %d %s", tag, a.status, a.body)
		}
	}
	// batch: two ranges, [1,101) then [101,201). The first one's tail
	// cannot go back any more (the store's compare-and-set refuses it);
	// the second one's, 111 on, does.
	rangeOf := func() (start, end, token string) {
		a := do(t, "POST", ts.URL+"/segment/batch/range?size=50", "", "")
		var r struct {
			Start, End   string
			ReleaseToken string `json:"release_token"`
		}
		if err := json.Unmarshal([]byte(a.body), &r); a.status != 200 || err != nil || r.ReleaseToken == "" {
			t.Fatalf("range: %d %s %v", a.status, a.body, err)
		}
		return r.Start, r.End, r.ReleaseToken
	}
	releaseBody := func(token, from string) string { return `{"release_token":"` + token + `","from":"` + from + `"}` }
	s1, e1, tok1 := rangeOf()
	s2, e2, tok2 := rangeOf()
	if s1 != "1" || e1 != "101" || s2 != "101" || e2 != "201" {
		t.Fatalf("ranges [%s,%s) [%s,%s), want [1,101) [101,201)", s1, e1, s2, e2)
	}
	for _, tc := range []struct {
		token, from string
		status      int
	}{
		{tok1, "11", 409},  // reserved past since
		{tok2, "111", 200}, // [111,201) goes back
		{tok2, "111", 409}, // only once
	} {
		if a := do(t, "POST", ts.URL+"/segment/batch/range/release", "", releaseBody(tc.token, tc.from)); a.status != tc.status {
			t.Fatalf("release from %s: %d %s, want %d", tc.from, a.status, a.body, tc.status)
		}
	}
	body := metrics()
	if !strings.Contains(body, series("batch", "client")+" 90\n") || strings.Contains(body, `source="shutdown"`) {
		t.Fatalf("after the release route: want %s 90 and no shutdown series:\n%s", series("batch", "client"), grep(body, "released"))
	}

	// Someone else reserves invoice past this allocator's segment: its
	// hand-back will be refused.
	other := newAllocator(t, st, opts)
	if _, err := other.Next(ctx, "invoice"); err != nil {
		t.Fatal(err)
	}
	if err := alloc.Close(); err != nil {
		t.Fatal(err)
	}
	body = metrics()
	if !strings.Contains(body, series("order", "shutdown")+" 99\n") {
		t.Errorf("after Close: want %s 99:\n%s", series("order", "shutdown"), grep(body, "released"))
	}
	if strings.Contains(body, series("invoice", "shutdown")) {
		t.Errorf("a refused hand-back was counted:\n%s", grep(body, "released"))
	}
	for tag, want := range map[string]int64{"order": 2, "batch": 111} {
		if id, err := other.Next(ctx, tag); err != nil || id != want {
			t.Errorf("%s after the hand-backs: %d %v, want %d", tag, id, err, want)
		}
	}
}

// grep returns the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
