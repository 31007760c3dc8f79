package server

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var issuedTag = regexp.MustCompile(`^idgen_ids_issued_total\{mode="segment",tag="([^"]*)"\} (\S+)$`)

// issuedTags is the scrape's idgen_ids_issued_total, tag → value.
func issuedTags(t *testing.T, m *Metrics) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(scrape(t, m), "\n") {
		if s := issuedTag.FindStringSubmatch(line); s != nil {
			out[s[1]] = s[2]
		}
	}
	return out
}

// The places go to the busiest tags at each ranking: a tag that went
// quiet loses its series to a busier one, a tag with a place keeps it
// against one a little busier, and no ID is counted twice or lost.
func TestMetrics_RankTags(t *testing.T) {
	t.Parallel()
	m, err := NewMetricsConfig(MetricsConfig{TagLimit: 3, Tags: []string{"pinned"}})
	if err != nil {
		t.Fatal(err)
	}
	issue := func(tag string, n int) { m.countIssued(tag, ModeSegment, n) }
	// First come: a and b take the two free places.
	issue("a", 1)
	issue("b", 1)
	issue("c", 1)
	issue("d", 1)
	if got, want := issuedTags(t, m), map[string]string{"a": "1", "b": "1", OtherTag: "2"}; !maps.Equal(got, want) {
		t.Fatalf("before ranking: %v, want %v", got, want)
	}

	// Since then: a quiet, b busy, c busiest, d a little busier than b
	// but not twice as busy.
	issue("b", 10)
	issue("c", 50)
	issue("d", 15)
	m.rankTags()
	if got, want := issuedTags(t, m), map[string]string{"b": "11", OtherTag: "67"}; !maps.Equal(got, want) {
		t.Fatalf("just after ranking: %v, want %v (a's series gone, c's not made yet)", got, want)
	}
	issue("a", 5)
	issue("c", 7)
	issue("d", 3)
	got := issuedTags(t, m)
	if want := map[string]string{"b": "11", "c": "7", OtherTag: "75"}; !maps.Equal(got, want) {
		t.Fatalf("after ranking: %v, want %v", got, want)
	}
	if has := []string{"b", "c", "pinned"}; !slices.Equal(ownTags(m), has) {
		t.Errorf("tags with a place: %v, want %v", ownTags(m), has)
	}

	// maybeRank waits for the interval.
	m.countIssued("a", ModeSegment, 100)
	m.maybeRank(time.Now())
	if m.tags.has("a") {
		t.Error("ranked again before rankInterval")
	}
	m.maybeRank(time.Now().Add(rankInterval + time.Second))
	if !m.tags.has("a") {
		t.Error("a, the busiest since, has no place after rankInterval")
	}
}

func ownTags(m *Metrics) []string {
	var out []string
	m.tags.own.Range(func(k, _ any) bool { out = append(out, k.(string)); return true })
	slices.Sort(out)
	return out
}

// Rankings while IDs are counted and segments load: the race detector
// finds no race, and no tag that lost its place keeps or regains a
// series afterwards.
func TestMetrics_RankTagsConcurrent(t *testing.T) {
	t.Parallel()
	const limit = 5
	m, err := NewMetricsConfig(MetricsConfig{TagLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				m.rankTags()
			}
		}
	})
	var workers sync.WaitGroup
	for w := range 8 {
		workers.Go(func() {
			for i := range 3000 {
				tag := fmt.Sprintf("t%d", (i*(w+1))%40)
				m.countIssued(tag, ModeSegment, 1+i%7)
				if i%50 == 0 {
					m.SegmentLoaded(tag, 10, time.Millisecond, nil)
					m.WaitedForLoad(tag)
					m.SegmentReleased(tag, 3, i%100 == 0)
				}
			}
		})
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	for _, metric := range []string{"idgen_ids_issued_total", "idgen_segment_loads_total", "idgen_segment_empty_buffer_waits_total", "idgen_segment_regressions_total",
		"idgen_segment_released_ids_total"} {
		tags := map[string]bool{}
		for _, line := range strings.Split(scrape(t, m), "\n") {
			if strings.HasPrefix(line, metric+"{") {
				_, rest, _ := strings.Cut(line, `tag="`)
				tag, _, _ := strings.Cut(rest, `"`)
				tags[tag] = true
			}
		}
		if len(tags) == 0 {
			t.Errorf("%s has no series", metric)
		}
		var own []string
		for tag := range tags {
			if tag != OtherTag {
				own = append(own, tag)
				if !m.tags.has(tag) {
					t.Errorf("%s has a series for %s, which has no place", metric, tag)
				}
			}
		}
		if len(own) > limit {
			t.Errorf("%s has series for %d tags %v, more than %d", metric, len(own), own, limit)
		}
	}
}
