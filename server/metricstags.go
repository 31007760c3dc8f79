package server

import (
	"fmt"
	"sync"
	"sync/atomic"

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
// first issue IDs, until TagLimit. A tag keeps its label for the life of
// the process: its counters never move between series, so rate() and
// increase() over any of them, and over their sum, stay exact. After a
// start the first tags to load are mostly the busiest, since they are
// the ones most likely to be asked for first; name the tags that must be
// seen whatever happens in MetricsConfig.Tags (serve --metrics-tags).
type tagLabels struct {
	limit int
	own   sync.Map // tag → struct{}: the tags with series of their own
	mu    sync.Mutex
	n     int         // len(own), under mu
	full  atomic.Bool // n == limit: no more places
}

func newTagLabels(cfg MetricsConfig) (*tagLabels, error) {
	l := &tagLabels{limit: cfg.TagLimit}
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
