package server

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idgen/idgen"
)

// OtherTag is the tag label under which the metrics count every tag that
// has no series of its own. It is no valid tag (idgen.CheckTag refuses
// "~"), so it can never be mistaken for one.
const OtherTag = "~other"

// DefaultMetricsTagLimit is how many tags get series of their own when
// MetricsConfig leaves it unset: about seven series each, so that an
// instance serving the default 10,000 tags exports hundreds of series,
// not 70,000.
const DefaultMetricsTagLimit = 100

// MetricsConfig bounds the per-tag series of NewMetricsConfig.
type MetricsConfig struct {
	// TagLimit is how many tags get series of their own, Tags included;
	// every other tag is counted under OtherTag. 0 means
	// DefaultMetricsTagLimit; negative means Tags only.
	TagLimit int
	// Tags always get series of their own, whatever their traffic.
	Tags []string
}

// tagLabels chooses each tag's label value. The named tags have theirs
// from the start; the others take the free places in the order they
// first issue IDs, until TagLimit. Every rankInterval (checked at a
// scrape) the places are given again to the tags that issued the most
// IDs since the last ranking, a tag that has a place counting double so
// that two tags of about the same traffic do not swap back and forth. A
// tag that loses its place loses its series, and its IDs count under
// OtherTag from then on; one that gains a place gets series from 0. No
// count moves between series, so rate() and increase() over each, and
// sums over tag, stay right; only an ID counted at the very moment its
// tag loses its place may be missed (its request held the old series).
type tagLabels struct {
	limit  int
	pinned map[string]bool
	own    sync.Map // tag → struct{}: the tags with series of their own
	mu     sync.Mutex
	n      int         // len(own), under mu
	full   atomic.Bool // n == limit: no more places
}

// rankInterval is how often the places are given again.
const rankInterval = 5 * time.Minute

func newTagLabels(cfg MetricsConfig) (*tagLabels, error) {
	l := &tagLabels{limit: cfg.TagLimit, pinned: map[string]bool{}}
	switch {
	case l.limit == 0:
		l.limit = DefaultMetricsTagLimit
	case l.limit < 0:
		l.limit = 0
	}
	for _, t := range cfg.Tags {
		if err := idgen.CheckTag(t); err != nil {
			return nil, fmt.Errorf("server: metrics tag %q: %w", t, err)
		}
		if _, dup := l.own.LoadOrStore(t, struct{}{}); !dup {
			l.n++
		}
		l.pinned[t] = true
	}
	l.limit = max(l.limit, l.n)
	l.full.Store(l.n >= l.limit)
	return l, nil
}

// label returns the label value of tag, giving it a place of its own if
// one is free. Call it only for tags that exist: a place, once given, is
// kept. The snowflake generator's empty tag is its own.
func (l *tagLabels) label(tag string) string {
	if tag == "" || l.has(tag) {
		return tag
	}
	if l.full.Load() {
		return OtherTag
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.has(tag) {
		return tag
	}
	if l.n >= l.limit {
		return OtherTag
	}
	l.own.Store(tag, struct{}{})
	l.n++
	l.full.Store(l.n >= l.limit)
	return tag
}

// has reports whether tag has series of its own, giving it none.
func (l *tagLabels) has(tag string) bool {
	_, ok := l.own.Load(tag)
	return ok
}

// withLabel calls f with tag's label value, holding off a ranking until
// f has made or used the series it needs.
func (m *Metrics) withLabel(tag string, f func(label string)) {
	m.rank.RLock()
	defer m.rank.RUnlock()
	f(m.tags.label(tag))
}

// maybeRank ranks the tags if rankInterval has passed since the last
// time; one caller does it.
func (m *Metrics) maybeRank(now time.Time) {
	last := m.rankedAt.Load()
	if now.UnixNano()-last < int64(rankInterval) || !m.rankedAt.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	m.rankTags()
}

// rankTags gives the places that are not the named tags' to the tags
// that issued the most IDs since the last ranking.
func (m *Metrics) rankTags() {
	l := m.tags
	type candidate struct {
		tag   string
		score int64
	}
	var cands []candidate
	m.cache.tags.Range(func(k, v any) bool {
		tag, n := k.(string), v.(*tagEntry).active.Swap(0)
		if tag == "" || l.pinned[tag] {
			return true
		}
		if l.has(tag) {
			n *= 2
		} else if n == 0 {
			return true
		}
		cands = append(cands, candidate{tag, n})
		return true
	})
	slices.SortFunc(cands, func(a, b candidate) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.tag, b.tag)
	})
	places := l.limit - len(l.pinned)
	keep := map[string]bool{}
	for _, c := range cands[:min(places, len(cands))] {
		keep[c.tag] = true
	}

	m.rank.Lock()
	defer m.rank.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var lost, won []string
	l.own.Range(func(k, _ any) bool {
		if tag := k.(string); !l.pinned[tag] && !keep[tag] {
			lost = append(lost, tag)
		}
		return true
	})
	for tag := range keep {
		if !l.has(tag) {
			won = append(won, tag)
		}
	}
	for _, tag := range lost {
		l.own.Delete(tag)
		l.n--
		match := prometheus.Labels{"tag": tag}
		for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.issued, m.loads, m.reserved, m.waits, m.regressions, m.released} {
			v.DeletePartialMatch(match)
		}
		m.cache.tags.Delete(tag)
	}
	for _, tag := range won {
		l.own.Store(tag, struct{}{})
		l.n++
		m.cache.tags.Delete(tag)
		m.regressions.WithLabelValues(tag)
		m.waits.WithLabelValues(tag)
	}
	l.full.Store(l.n >= l.limit)
}
