package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
)

// The oracle, checked as IDs are handed out: no ID twice, IDs increasing
// per incarnation, segment IDs inside a range reserved for their
// incarnation, no hand-back of an ID handed out, and one stamper at a
// time per worker ID.

// tagID is a segment ID; each tag is a space of its own.
type tagID struct {
	tag string
	id  int64
}

// handOut records segment IDs an incarnation handed out.
func (w *world) handOut(p *proc, tag string, ids []int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	ranges := p.ranges[tag]
	for _, id := range ids {
		if !slices.ContainsFunc(ranges, func(r segment.Range) bool { return r.Start <= id && id < r.End }) {
			return w.violation("process %d (incarnation %d) handed out %s ID %d outside every range reserved for it", p.id, p.inc, tag, id)
		}
		if id <= p.last[tag] {
			return w.violation("process %d (incarnation %d): %s ID %d after %d, not increasing", p.id, p.inc, tag, id, p.last[tag])
		}
		p.last[tag] = id
		if err := w.record(tag, id, p.inc); err != nil {
			return err
		}
	}
	return nil
}

// record notes that incarnation inc handed out a segment ID (w.mu held).
func (w *world) record(tag string, id int64, inc int) error {
	k := tagID{tag, id}
	if prev, dup := w.segIDs[k]; dup {
		return w.violation("%s ID %d handed out twice: by incarnation %d and by incarnation %d", tag, id, prev, inc)
	}
	w.segIDs[k] = inc
	return nil
}

// handOutRange records a range client's IDs [from, to), on its own
// goroutine: a violation is found late.
func (w *world) handOutRange(inc int, tag string, from, to int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := from; id < to; id++ {
		if err := w.record(tag, id, inc); err != nil {
			w.lateErr = cmp.Or(w.lateErr, err)
			return false
		}
	}
	return true
}

// checkRelease checks a hand-back about to run (w.mu held): an ID of
// [from, to) handed out would be handed out again by a later reservation.
func (w *world) checkRelease(inc int, tag string, from, to int64) error {
	for id := from; id < to && id-from < 1<<16; id++ {
		if prev, ok := w.segIDs[tagID{tag, id}]; ok {
			return w.violation("incarnation %d handed back %s [%d,%d), whose ID %d incarnation %d handed out", inc, tag, from, to, id, prev)
		}
	}
	return nil
}

// snowNext takes a snowflake ID of p and checks it.
func (w *world) snowNext(p *proc) error {
	if p.gen == nil {
		return nil
	}
	id, err := p.gen.Next(context.Background(), "t")
	w.trace("  snowflake %d.%d: %d %v", p.id, p.inc, id, err)
	if err != nil {
		if isAny(err, snowflake.ErrNoWorkerLease, snowflake.ErrClockMovedBackwards, snowflake.ErrClosed) {
			return nil
		}
		return w.violation("unexpected snowflake error: %v", err)
	}
	if id <= p.lastSF {
		return w.violation("process %d (incarnation %d): snowflake ID %d after %d, not increasing", p.id, p.inc, id, p.lastSF)
	}
	p.lastSF = id
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, dup := w.snow[id]; dup {
		return w.violation("snowflake ID %d handed out twice: incarnation %d and process %d (incarnation %d, worker %d)", id, prev, p.id, p.inc, p.gen.WorkerID())
	}
	w.snow[id] = p.inc
	// Two holders of a worker ID stamp at once when one stamps a time at
	// or before another's last (the layout: 19 sequence, 3 worker bits).
	last := w.stamps[id>>19&7]
	if last.inc != p.inc && int(id>>22) <= last.ts {
		return w.violation("incarnation %d stamped worker %d at %d, not after incarnation %d's %d", p.inc, id>>19&7, id>>22, last.inc, last.ts)
	}
	w.stamps[id>>19&7].inc, w.stamps[id>>19&7].ts = p.inc, int(id>>22)
	w.res.SnowflakeIDs++
	return nil
}

// checkSegErr accepts the errors an allocator may return under faults.
func (w *world) checkSegErr(p *proc, tag string, err error) error {
	w.trace("  %d.%d %s: %v", p.id, p.inc, tag, err)
	if isAny(err, context.Canceled, context.DeadlineExceeded, segment.ErrUnavailable, segment.ErrExhausted,
		segment.ErrClosed, segment.ErrTagNotFound, segment.ErrTagLimit) {
		return nil
	}
	return w.violation("unexpected allocator error: %v", err)
}

func isAny(err error, targets ...error) bool {
	return slices.ContainsFunc(targets, func(t error) bool { return errors.Is(err, t) })
}

// lock takes lock L for p, or renews or releases p's grant of it: a
// token granted must be above every token seen granted before, lost ones
// included (the fence raises lock rows as it raises id_sequence).
func (w *world) lock(p *proc) error {
	b, ctx, held := p.s.Locks(), context.Background(), p.grant
	var g lock.Grant
	var err error
	switch {
	case held.Token == 0:
		w.faulty(p.f, w.faults, func() { g, err = b.Acquire(ctx, "L", fmt.Sprintf("p%d.%d", p.id, p.inc), leaseTTL, false) })
	case w.chance(0.7):
		w.faulty(p.f, w.faults, func() { g, err = b.Renew(ctx, held, leaseTTL) })
	default:
		w.faulty(p.f, w.faults, func() { err = b.Release(ctx, held) })
	}
	w.trace("  lock %d.%d: token %d after %d: %v", p.id, p.inc, g.Token, held.Token, err)
	switch {
	case err == nil && g.Token == 0, isAny(err, lock.ErrLost, lock.ErrNotHeld):
		p.grant = lock.Grant{}
	case err != nil:
	case held.Token != 0 && g.Token != held.Token:
		return w.violation("a renewal of token %d gave token %d", held.Token, g.Token)
	case held.Token == 0 && g.Token <= w.topToken:
		return w.violation("lock L granted with token %d, not above %d granted before", g.Token, w.topToken)
	default:
		w.topToken, p.grant = max(w.topToken, g.Token), g
	}
	return nil
}
