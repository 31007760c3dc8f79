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

// The gate between each allocator and its store: every call parks until
// the simulator runs it, one at a time, in an order the seed picks.

type originKey struct{}

type call struct {
	g      *gated
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
func park[T any](ctx context.Context, g *gated, c *call, run func() (T, error)) (v T, err error) {
	if g.dead.Load() {
		return v, errGone
	}
	w := g.p.w
	c.g, c.start = g, make(chan bool, 1)
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
			return v, errGone
		}
	case <-ctx.Done():
		w.mu.Lock()
		w.pending = slices.DeleteFunc(w.pending, func(x *call) bool { return x == c })
		w.mu.Unlock()
		return v, ctx.Err()
	}
	v, err = run()
	w.trace("  done %d %s %s %s a=%d b=%d: %v", g.inc, c.origin, c.kind, c.tag, c.a, c.b, err)
	return v, err
}

func (g *gated) Reserve(ctx context.Context, tag string, step int64) (segment.Range, error) {
	r, err := park(ctx, g, &call{kind: "reserve", tag: tag, a: step}, func() (segment.Range, error) { return g.s.Reserve(ctx, tag, step) })
	if err == nil {
		w := g.p.w
		w.mu.Lock()
		g.p.ranges[tag] = append(g.p.ranges[tag], r)
		if !g.dead.Load() {
			w.seen.Store(g.p)
		}
		w.res.Reservations++
		w.mu.Unlock()
		w.trace("  reserved %d %s [%d,%d)", g.inc, tag, r.Start, r.End)
	}
	return r, err
}

func (g *gated) CreateTag(ctx context.Context, t segment.Tag) error {
	_, err := park(ctx, g, &call{kind: "create", tag: t.Name, a: t.MaxID, b: t.Step}, func() (struct{}, error) {
		return struct{}{}, g.s.CreateTag(ctx, t)
	})
	return err
}

func (g *gated) Release(ctx context.Context, tag string, from, to int64) (bool, error) {
	return park(ctx, g, &call{kind: "release", tag: tag, a: from, b: to}, func() (bool, error) {
		w := g.p.w
		w.mu.Lock()
		verr := w.checkRelease(g.inc, tag, from, to)
		w.mu.Unlock()
		if verr != nil {
			w.late(verr)
			return false, verr
		}
		return g.s.Release(ctx, tag, from, to)
	})
}

func (g *gated) Raise(ctx context.Context, tag string, to int64) (bool, error) {
	return park(ctx, g, &call{kind: "raise", tag: tag, a: to}, func() (bool, error) { return g.s.Raise(ctx, tag, to) })
}

// take removes and returns the parked call the pick chooses among those
// only selects (nil: any), or nil. The calls are sorted by who made them
// first, so that a pick by index is the same on every run.
func (w *world) take(only func(*call) bool, pick func(n int) int) *call {
	w.mu.Lock()
	defer w.mu.Unlock()
	slices.SortFunc(w.pending, func(x, y *call) int {
		return cmp.Or(cmp.Compare(x.g.inc, y.g.inc), strings.Compare(x.origin, y.origin), strings.Compare(x.tag, y.tag),
			strings.Compare(x.kind, y.kind), cmp.Compare(x.a, y.a), cmp.Compare(x.b, y.b))
	})
	can := slices.DeleteFunc(slices.Clone(w.pending), func(c *call) bool { return only != nil && !only(c) || c.g.p.paused.Load() })
	if len(can) == 0 {
		return nil
	}
	c := can[pick(len(can))]
	w.pending = slices.DeleteFunc(w.pending, func(x *call) bool { return x == c })
	return c
}

// run lets c go, with a fault armed in its process's connections if
// faults is set, and waits until it is done or blocked.
func (w *world) run(c *call, faults bool) error {
	w.trace("  deliver %d %s %s %s a=%d b=%d", c.g.inc, c.origin, c.kind, c.tag, c.a, c.b)
	if c.g.dead.Load() {
		c.start <- false
		return nil
	}
	if c.kind == "create" {
		// What a loss of the tag's creation goes back to.
		if err := w.snapshot(snapCreate); err != nil {
			return err
		}
	}
	w.faulty(c.g.p.f, faults, func() {
		c.start <- true
		synctest.Wait()
	})
	return nil
}

// faulty runs do with a fault armed in f, if on: one in ten breaks a
// connection at one of the transaction's first statements, one in
// twenty loses a commit's answer.
func (w *world) faulty(f *faults, on bool, do func()) {
	failAt, ambiguous := 0, false
	if on {
		switch r := w.pick(100); {
		case r < 10:
			failAt = 1 + w.pick(6)
		case r < 15:
			ambiguous = true
		}
	}
	f.arm(failAt, ambiguous)
	do()
	f.arm(0, false)
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
	w.lateErr = cmp.Or(w.lateErr, err)
	w.mu.Unlock()
}
