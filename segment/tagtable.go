package segment

import (
	"sync"
	"sync/atomic"
)

// tagTable maps tag names to their *Sequence for Allocator.Next, which
// looks a tag up on every call. A lookup of a tag in read is one atomic
// load and one map lookup (one hash of the string), with no lock and no
// allocation: read is an immutable map, replaced whole, never changed.
//
// New tags go to recent, under mu, and are promoted into a fresh read
// once recent has been missed in as many times as it holds tags (as the
// read and dirty maps of the first sync.Map were), so that each new tag
// costs amortised O(1) copies however many tags there are, and a tag in
// recent is promoted after a few lookups. Tags are bounded by
// Options.MaxTags, and only forgetIfUnknown deletes.
type tagTable struct {
	read atomic.Pointer[map[string]*Sequence] // never nil after init

	mu     sync.Mutex
	recent map[string]*Sequence // tags not in read yet
	misses int                  // lookups in recent since the last promotion
}

// get returns the Sequence of tag if read has it, nil otherwise: one
// atomic load and one map access, small enough to inline into
// Allocator.Next, where the calls it saves are a fair share of a lookup
// that costs a few nanoseconds.
func (t *tagTable) get(tag string) *Sequence { return (*t.read.Load())[tag] }

// init makes read an empty map, so that get need not check for nil.
func (t *tagTable) init() { t.read.Store(&map[string]*Sequence{}) }

// load returns the Sequence of tag.
func (t *tagTable) load(tag string) (*Sequence, bool) {
	if s := t.get(tag); s != nil {
		return s, true
	}
	return t.loadRecent(tag)
}

// loadRecent is load for a tag not in read.
func (t *tagTable) loadRecent(tag string) (*Sequence, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.recent[tag]
	if ok {
		t.missed()
	}
	return s, ok
}

// missed counts a lookup that had to take mu and promotes recent when
// the misses have paid for the copy. mu is held.
func (t *tagTable) missed() {
	t.misses++
	if t.misses < len(t.recent) {
		return
	}
	old := t.snapshot()
	m := make(map[string]*Sequence, len(old)+len(t.recent))
	for k, v := range old {
		m[k] = v
	}
	for k, v := range t.recent {
		m[k] = v
	}
	t.read.Store(&m)
	t.recent, t.misses = nil, 0
}

// snapshot is the current read map (nil before the first promotion).
func (t *tagTable) snapshot() map[string]*Sequence {
	if r := t.read.Load(); r != nil {
		return *r
	}
	return nil
}

// loadOrStore returns tag's Sequence, storing s for it if it has none;
// loaded says it had one.
func (t *tagTable) loadOrStore(tag string, s *Sequence) (_ *Sequence, loaded bool) {
	if cur, ok := t.snapshot()[tag]; ok {
		return cur, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.snapshot()[tag]; ok { // promoted meanwhile
		return cur, true
	}
	if cur, ok := t.recent[tag]; ok {
		return cur, true
	}
	if t.recent == nil {
		t.recent = make(map[string]*Sequence)
	}
	t.recent[tag] = s
	return s, false
}

// compareAndDelete deletes tag if its Sequence is s.
func (t *tagTable) compareAndDelete(tag string, s *Sequence) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.recent[tag]; ok {
		if cur != s {
			return false
		}
		delete(t.recent, tag)
		return true
	}
	old := t.snapshot()
	if cur, ok := old[tag]; !ok || cur != s {
		return false
	}
	m := make(map[string]*Sequence, len(old))
	for k, v := range old {
		if k != tag {
			m[k] = v
		}
	}
	t.read.Store(&m)
	return true
}

// all returns every Sequence, in no particular order.
func (t *tagTable) all() []*Sequence {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.snapshot()
	out := make([]*Sequence, 0, len(old)+len(t.recent))
	for _, v := range old {
		out = append(out, v)
	}
	for _, v := range t.recent {
		out = append(out, v)
	}
	return out
}
