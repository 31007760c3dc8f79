package sim

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing/synctest"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store"
)

// The gate between each allocator and its real store: every call parks
// until the simulator lets it run (deliverOne, deliverAll), one at a
// time and in an order it picks from the seed, so the database sees the
// same transactions in the same order on every run.

type originKey struct{}

type call struct {
	p      *proc
	inc    int
	dead   *atomic.Bool
	origin string // "load", or the client operation it belongs to
	kind   string
	tag    string
	a, b   int64
	start  chan bool // true: run; false: fail as a dead process
}

// gated is one incarnation's segment.Store: its real store behind the gate.
type gated struct {
	p    *proc
	inc  int
	dead *atomic.Bool
	s    *store.Store
}

var _ interface {
	segment.Releaser
	segment.Raiser
} = (*gated)(nil)

// park waits until the simulator delivers c, then runs it.
func (g *gated) park(ctx context.Context, c *call, run func() error) error {
	if g.dead.Load() {
		return errGone
	}
	w := g.p.w
	c.p, c.inc, c.dead, c.start = g.p, g.inc, g.dead, make(chan bool, 1)
	c.origin, _ = ctx.Value(originKey{}).(string)
	if c.origin == "" {
		c.origin = "load"
	}
	w.mu.Lock()
	w.pending = append(w.pending, c)
	w.mu.Unlock()
	select {
	case ok := <-c.start:
		if !ok {
			return errGone
		}
	case <-ctx.Done():
		w.mu.Lock()
		w.pending = slices.DeleteFunc(w.pending, func(x *call) bool { return x == c })
		w.mu.Unlock()
		return ctx.Err()
	}
	err := run()
	w.trace("  done %d %s %s %s a=%d b=%d: %v", c.inc, c.origin, c.kind, c.tag, c.a, c.b, err)
	return err
}

func (g *gated) Reserve(ctx context.Context, tag string, step int64) (segment.Range, error) {
	var r segment.Range
	err := g.park(ctx, &call{kind: "reserve", tag: tag, a: step}, func() error {
		var err error
		r, err = g.s.Reserve(ctx, tag, step)
		return err
	})
	if err == nil {
		w := g.p.w
		w.mu.Lock()
		g.p.ranges[tag] = append(g.p.ranges[tag], r)
		w.res.Reservations++
		w.mu.Unlock()
		w.trace("  reserved %d %s [%d,%d)", g.inc, tag, r.Start, r.End)
	}
	return r, err
}

func (g *gated) CreateTag(ctx context.Context, t segment.Tag) error {
	return g.park(ctx, &call{kind: "create", tag: t.Name, a: t.MaxID, b: t.Step}, func() error { return g.s.CreateTag(ctx, t) })
}

func (g *gated) Release(ctx context.Context, tag string, from, to int64) (bool, error) {
	var ok bool
	err := g.park(ctx, &call{kind: "release", tag: tag, a: from, b: to}, func() error {
		w := g.p.w
		w.mu.Lock()
		verr := w.checkRelease(g.inc, tag, from, to)
		w.mu.Unlock()
		if verr != nil {
			w.late(verr)
			return verr
		}
		var err error
		ok, err = g.s.Release(ctx, tag, from, to)
		return err
	})
	return ok, err
}

func (g *gated) Raise(ctx context.Context, tag string, to int64) (bool, error) {
	var ok bool
	err := g.park(ctx, &call{kind: "raise", tag: tag, a: to}, func() error {
		var err error
		ok, err = g.s.Raise(ctx, tag, to)
		return err
	})
	return ok, err
}

// sortPending orders the parked calls by who made them (w.mu held), so
// that a pick by index is the same on every run.
func (w *world) sortPending() {
	slices.SortFunc(w.pending, func(x, y *call) int {
		return cmp.Or(cmp.Compare(x.inc, y.inc), strings.Compare(x.origin, y.origin), strings.Compare(x.tag, y.tag),
			strings.Compare(x.kind, y.kind), cmp.Compare(x.a, y.a), cmp.Compare(x.b, y.b))
	})
}

// take removes and returns the parked call the pick chooses among those
// only selects (nil: any), or nil.
func (w *world) take(only func(*call) bool, pick func(n int) int) *call {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sortPending()
	var idx []int
	for i, c := range w.pending {
		if (only == nil || only(c)) && !c.p.isPaused() {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	i := idx[pick(len(idx))]
	c := w.pending[i]
	w.pending = slices.Delete(w.pending, i, i+1)
	return c
}

// run lets c go, with a fault armed in its process's connections if
// faults is set, and waits until it is done or blocked.
func (w *world) run(c *call, faults bool) error {
	w.trace("  deliver %d %s %s %s a=%d b=%d", c.inc, c.origin, c.kind, c.tag, c.a, c.b)
	if c.dead.Load() {
		c.start <- false
		return nil
	}
	if c.kind == "create" {
		// What a loss of the tag's creation goes back to.
		if err := w.snapshot(snapCreate); err != nil {
			return err
		}
	}
	fail, amb := w.pickFault(faults)
	c.p.f.arm(fail, amb)
	c.start <- true
	synctest.Wait()
	c.p.f.arm(0, false)
	return nil
}

// pickFault picks the fault armed for a delivery: one in ten breaks a
// connection at one of the transaction's first statements, one in
// twenty loses a commit's answer.
func (w *world) pickFault(on bool) (failAt int, ambiguous bool) {
	if !on {
		return 0, false
	}
	switch r := w.pick(100); {
	case r < 10:
		return 1 + w.pick(6), false
	case r < 15:
		return 0, true
	}
	return 0, false
}

func (w *world) deliverOne() error {
	c := w.take(nil, w.pick)
	if c == nil {
		return nil
	}
	return w.run(c, w.faults)
}

// deliverAll runs every parked call only selects, and those they lead
// to, in order, without faults.
func (w *world) deliverAll(only func(*call) bool) error {
	for range 200 {
		synctest.Wait()
		c := w.take(only, func(int) int { return 0 })
		if c == nil {
			return nil
		}
		if err := w.run(c, false); err != nil {
			return err
		}
	}
	return errors.New("sim: store calls keep coming")
}

// late records a violation found off the simulator's goroutine.
func (w *world) late(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lateErr == nil {
		w.lateErr = err
	}
}
