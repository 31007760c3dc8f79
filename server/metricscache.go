package server

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The hot path's metric children are looked up once and kept here:
// WithLabelValues hashes every label value and takes the vector's lock on
// each call, which the profile of GET /id/{tag} put among the largest
// costs of a request. A cached child is the same series, so nothing
// changes in /metrics; the vectors are never Reset, which would orphan
// the children kept here.

// maxCachedPerKey bounds the children cached under one route or tag;
// beyond it lookups go to the vector as before, uncached. The series
// themselves are bounded where their labels are chosen.
const maxCachedPerKey = 32

// children is a copy-on-write list of the children of one vector that
// share a first label value, found by the rest of their labels: a status
// code and method for a route, a mode for a tag. It is short, so a linear
// scan beats a map.
type children[T any] struct {
	mu   sync.Mutex
	list atomic.Pointer[[]child[T]]
}

type child[T any] struct {
	label string
	code  int
	m     T
}

func (c *children[T]) get(label string, code int, create func() T) T {
	if p := c.list.Load(); p != nil {
		for _, ch := range *p {
			if ch.code == code && ch.label == label {
				return ch.m
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old []child[T]
	if p := c.list.Load(); p != nil {
		old = *p
		for _, ch := range old {
			if ch.code == code && ch.label == label {
				return ch.m
			}
		}
	}
	m := create()
	if len(old) < maxCachedPerKey {
		list := append(old[:len(old):len(old)], child[T]{label, code, m})
		c.list.Store(&list)
	}
	return m
}

// seriesCache holds the cached children of the request histogram, by
// route pattern, and of the issued counter, by tag.
type seriesCache struct {
	// routes is copied on write: its keys are route patterns (gin's
	// FullPath) and "unmatched", a fixed handful, and a plain map reads
	// faster than a sync.Map.
	routesMu sync.Mutex
	routes   atomic.Pointer[map[string]*children[prometheus.Observer]]
	tags     sync.Map // tag → *tagEntry
}

// tagEntry is one tag's cached issued counters, by mode, and the IDs it
// issued since the tags were last ranked (metricstags.go). An entry's
// label is fixed: when the ranking gives a tag another, its entry is
// dropped and made again.
type tagEntry struct {
	active atomic.Int64
	children[prometheus.Counter]
}

func (sc *seriesCache) route(route string) *children[prometheus.Observer] {
	if p := sc.routes.Load(); p != nil {
		if c, ok := (*p)[route]; ok {
			return c
		}
	}
	sc.routesMu.Lock()
	defer sc.routesMu.Unlock()
	old := map[string]*children[prometheus.Observer]{}
	if p := sc.routes.Load(); p != nil {
		old = *p
	}
	if c, ok := old[route]; ok {
		return c
	}
	c := new(children[prometheus.Observer])
	routes := make(map[string]*children[prometheus.Observer], len(old)+1)
	for k, v := range old {
		routes[k] = v
	}
	routes[route] = c
	sc.routes.Store(&routes)
	return c
}

func (sc *seriesCache) tag(tag string) *tagEntry {
	if v, ok := sc.tags.Load(tag); ok {
		return v.(*tagEntry)
	}
	v, _ := sc.tags.LoadOrStore(tag, new(tagEntry))
	return v.(*tagEntry)
}

// requestObserver returns the request histogram's child for route,
// method and status code.
func (m *Metrics) requestObserver(route, method string, code int) prometheus.Observer {
	return m.cache.route(route).get(method, code, func() prometheus.Observer {
		return m.requests.WithLabelValues(route, method, strconv.Itoa(code))
	})
}

// issuedCounter returns the issued counter's child for tag and mode: the
// tag's own, or OtherTag's. The label is chosen when the child is first
// cached, off the hot path.
func (m *Metrics) issuedCounter(tag, mode string) prometheus.Counter {
	return m.issuedChild(m.cache.tag(tag), tag, mode)
}

func (m *Metrics) issuedChild(e *tagEntry, tag, mode string) prometheus.Counter {
	return e.get(mode, 0, func() prometheus.Counter {
		var c prometheus.Counter
		m.withLabel(tag, func(label string) { c = m.issued.WithLabelValues(label, mode) })
		return c
	})
}

// countIssued counts n IDs of tag issued in mode, and toward the tag's
// rank.
func (m *Metrics) countIssued(tag, mode string, n int) {
	e := m.cache.tag(tag)
	e.active.Add(int64(n))
	m.issuedChild(e, tag, mode).Add(float64(n))
}
