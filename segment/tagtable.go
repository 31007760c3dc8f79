package segment

import (
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// tagTable maps tag names to their *Sequence for Allocator.Next, which
// looks a tag up on every call. A lookup of a tag in read is one atomic
// load and one probe of an immutable index (see index), with no lock and
// no allocation: read is replaced whole, never changed.
//
// New tags go to recent, under mu, and are promoted into a fresh read
// once recent has been missed in as many times as it holds tags (as the
// read and dirty maps of the first sync.Map were), so that each new tag
// costs amortised O(1) copies however many tags there are, and a tag in
// recent is promoted after a few lookups. Tags are bounded by
// Options.MaxTags, and only forgetIfUnknown deletes.
type tagTable struct {
	read atomic.Pointer[index] // never nil after init

	mu     sync.Mutex
	recent map[string]*Sequence // tags not in read yet
	misses int                  // lookups in recent since the last promotion
}

// get returns the Sequence of tag if read has it, nil otherwise.
func (t *tagTable) get(tag string) *Sequence { return t.read.Load().get(tag) }

// init makes read an empty index, so that get need not check for nil.
func (t *tagTable) init() { t.read.Store(newIndex(map[string]*Sequence{})) }

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
	t.read.Store(newIndex(m))
	t.recent, t.misses = nil, 0
}

// snapshot is the current read map (nil before init).
func (t *tagTable) snapshot() map[string]*Sequence {
	if r := t.read.Load(); r != nil {
		return r.m
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
	t.read.Store(newIndex(m))
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

// index is one immutable snapshot of the promoted tags: the map m, and
// the same tags in slots, an open-addressed table that get probes with a
// cheap keyed hash (hash). The runtime's map hashes the whole string
// with its AES hash; one probe of slots is one multiply, a few loads
// and one string compare: 12.1 against 13.6 ns for Allocator.Next on one
// tag, 13.8 against 16.7 over 1,000 (docs/benchmarks.md).
//
// The hash reads only a tag's length and its first and last eight bytes,
// all of a tag of up to 16 bytes; longer tags that share those collide
// whatever the seed, and are told apart by the compare. A probe run is
// at most maxProbe slots: a snapshot whose tags do not fit so, in a few
// sizes and seeds (many long tags alike at both ends, which callers who
// create tags could arrange), has no slots, and get uses the map, whose
// hash no caller can make collide.
type index struct {
	m     map[string]*Sequence
	slots []slot // nil: get uses m
	mask  uint64
	seed  uint64
}

type slot struct {
	tag string
	seq *Sequence
}

// maxProbe bounds a probe run; growths bounds how many times newIndex
// doubles the table (and draws a new seed) to fit every run in it.
const (
	maxProbe = 8
	growths  = 3
)

func newIndex(m map[string]*Sequence) *index {
	x := &index{m: m}
	if len(m) == 0 {
		return x
	}
	size := 8
	for size < 4*len(m) {
		size <<= 1
	}
	for range growths {
		if x.fill(size) {
			return x
		}
		size <<= 1
	}
	x.slots = nil
	return x
}

// fill places every tag of m in a table of size slots under a new seed,
// and reports whether every probe run fits in maxProbe.
func (x *index) fill(size int) bool {
	x.slots, x.mask, x.seed = make([]slot, size), uint64(size-1), rand.Uint64() //nolint:gosec // G404: a hash seed, not a secret
	for tag, s := range x.m {
		i := x.hash(tag) & x.mask
		for n := 0; x.slots[i].seq != nil; n++ {
			if n+1 == maxProbe {
				return false
			}
			i = (i + 1) & x.mask
		}
		x.slots[i] = slot{tag, s}
	}
	return true
}

func (x *index) get(tag string) *Sequence {
	if x.slots == nil {
		return x.m[tag]
	}
	i := x.hash(tag) & x.mask
	for range maxProbe {
		sl := &x.slots[i]
		if sl.seq == nil || sl.tag == tag {
			return sl.seq
		}
		i = (i + 1) & x.mask
	}
	return nil
}

// hash mixes the length and the first and last eight bytes of s (all of
// it up to 16 bytes) with the index's seed.
func (x *index) hash(s string) uint64 {
	var a, b uint64
	switch n := len(s); {
	case n >= 8:
		a, b = le64(s), le64(s[n-8:])
	case n >= 4:
		a = uint64(le32(s)) | uint64(le32(s[n-4:]))<<32
	case n > 0:
		a = uint64(s[0]) | uint64(s[n>>1])<<8 | uint64(s[n-1])<<16
	}
	// One 64×64→128-bit multiply, its halves folded (as wyhash mixes):
	// every input bit reaches the low bits the table is indexed by.
	hi, lo := bits.Mul64(a^x.seed^0x9e3779b97f4a7c15, b^uint64(len(s))^0xc2b2ae3d27d4eb4f)
	return hi ^ lo
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}
