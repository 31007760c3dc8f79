package sim

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
)

// The oracle: every promise idgen makes about the IDs it hands out,
// checked as they are handed out, and about the store calls the
// allocator makes, checked as they are made.

// handOut records IDs a process handed out and checks every promise about
// them.
func (w *world) handOut(p *proc, tag string, ids []int64) error {
	w.db.mu.Lock()
	defer w.db.mu.Unlock()
	ranges := p.ranges[tag]
	for _, id := range ids {
		if !slices.ContainsFunc(ranges, func(r segment.Range) bool { return r.Start <= id && id < r.End }) {
			return w.violation("process %d (incarnation %d) handed out %s ID %d outside every range reserved for it", p.id, p.inc, tag, id)
		}
		if id <= p.last[tag] {
			return w.violation("process %d (incarnation %d): %s ID %d after %d, not increasing", p.id, p.inc, tag, id, p.last[tag])
		}
		p.last[tag] = id
		if prev, bad := w.record(tag, id, p.inc); bad {
			return w.violation("%s ID %d handed out twice: by incarnation %d and by process %d (incarnation %d) in %v", tag, id, prev, p.id, p.inc, ids)
		}
	}
	return nil
}

// record notes that incarnation inc handed out a segment ID (db.mu
// held), and reports a duplicate, with the incarnation that had it
// before. There is no exception: since the store fences, a lost commit
// explains no duplicate.
func (w *world) record(tag string, id int64, inc int) (prev int, bad bool) {
	k := tagID{tag, id}
	if prev, dup := w.segIDs[k]; dup {
		return prev, true
	}
	w.segIDs[k] = inc
	return 0, false
}

// checkRelease checks a hand-back about to commit (db.mu held): no ID of
// [from, to) may have been handed out, by anyone, or a later reservation
// hands it out again.
func (w *world) checkRelease(o *op) error {
	for id := o.a; id < o.b && id-o.a < 1<<16; id++ {
		if inc, ok := w.segIDs[tagID{o.tag, id}]; ok {
			return w.violation("incarnation %d handed back %s [%d,%d), whose ID %d incarnation %d handed out", o.inc, o.tag, o.a, o.b, id, inc)
		}
	}
	return nil
}

// checkNegative checks a store call about to park (db.mu held): a
// process that was told a tag is unknown makes no store call for it for
// NegativeTTL on its own clock.
func (w *world) checkNegative(p *proc, o *op) error {
	if p.inflight[inflightKey(o.tag, o.origin)] {
		return nil
	}
	until, ok := p.neg[o.tag]
	if ok && !p.wall().Before(until) {
		// The allocator may have a handle on the tag again, whose calls
		// a clock stepped back later must not count as lookups.
		delete(p.neg, o.tag)
		delete(p.negHi, o.tag)
		p.forgetInflight(o.tag)
		return nil
	}
	if ok {
		return w.violation("process %d (incarnation %d) called the store for %s %v after it was told the tag is unknown, within the negative cache's %v", p.id, p.inc, o.tag, negativeTTL-until.Sub(p.wall()), negativeTTL)
	}
	return nil
}

// inflightKey names the operation a store call belongs to: one load or
// ReserveRange of a tag (its origin).
func inflightKey(tag, origin string) string { return tag + "\x00" + origin }

// forgetInflight forgets the operations of tag in flight at its last miss.
func (p *proc) forgetInflight(tag string) {
	for k := range p.inflight {
		if t, _, _ := strings.Cut(k, "\x00"); t == tag {
			delete(p.inflight, k)
		}
	}
}

func (w *world) snowNext(p *proc) error {
	if p.gen == nil {
		return nil
	}
	id, err := p.gen.Next(context.Background(), "t")
	w.trace("  snowflake %d.%d: %d %v", p.id, p.inc, id, err)
	if err != nil {
		for _, ok := range []error{snowflake.ErrNoWorkerLease, snowflake.ErrClockMovedBackwards, snowflake.ErrClosed} {
			if errors.Is(err, ok) {
				return nil
			}
		}
		return w.violation("unexpected snowflake error: %v", err)
	}
	if id <= p.lastSF {
		return w.violation("process %d (incarnation %d): snowflake ID %d after %d, not increasing", p.id, p.inc, id, p.lastSF)
	}
	p.lastSF = id
	if prev, dup := w.snow[id]; dup {
		return w.violation("snowflake ID %d handed out twice: incarnation %d and process %d (incarnation %d, worker %d)", id, prev, p.id, p.inc, p.gen.WorkerID())
	}
	w.snow[id] = p.inc
	return nil
}
