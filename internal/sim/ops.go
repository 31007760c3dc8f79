package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idgen/idgen/segment"
)

// An op is one kind of step. Each has a name, for the weight table and
// the trace, and a weight: how often it is picked relative to the others
// (pebble's metamorphic config does the same).
type opFunc func(w *world, p *proc, tag string) error

var opFuncs = map[string]opFunc{
	// Segment clients.
	"next":         func(w *world, p *proc, tag string) error { return w.next(p, tag) },
	"next-n":       func(w *world, p *proc, tag string) error { return w.nextN(p, tag, 1+w.pick(40)) },
	"next-n-edge":  func(w *world, p *proc, _ string) error { return w.nextN(p, "edge", 1000+w.pick(5000)) },
	"next-waiting": func(w *world, p *proc, tag string) error { return w.nextWaiting(p, tag) },
	"reserve-range": func(w *world, p *proc, tag string) error {
		w.reserveRange(p, tag, int64(1+w.pick(30)))
		return nil
	},
	"unknown-tag": func(w *world, p *proc, _ string) error { return w.next(p, []string{"late", "ghost"}[w.pick(2)]) },
	"tag-flood":   func(w *world, p *proc, _ string) error { return w.next(p, fmt.Sprintf("flood%d", w.pick(12))) },
	"create-late": func(w *world, _ *proc, _ string) error { w.db.createLate(); return nil },
	// The store and time.
	"deliver": func(w *world, _ *proc, _ string) error { w.deliverOne(); return nil },
	"tick": func(w *world, _ *proc, _ string) error {
		w.advance(time.Duration(w.pick(300)) * time.Millisecond)
		return nil
	},
	"leap": func(w *world, _ *proc, _ string) error {
		w.advance(time.Duration(1+w.pick(8)) * time.Second)
		return nil
	},
	// A tag's step now and then above every process's cap, up to ten
	// times the fencer's: the margin covers it from the store's largest
	// row step (fence.Live.RangeCap), the witness raise whatever it is.
	"set-step": func(w *world, _ *proc, tag string) error {
		step := int64(1 + w.pick(40))
		if w.chance(0.25) {
			step = int64(1 + w.pick(10*maxStep))
		}
		w.db.setStep(tag, step)
		return nil
	},
	// Processes.
	"crash":   func(w *world, p *proc, _ string) error { return w.crash(p) },
	"restart": func(w *world, p *proc, _ string) error { return w.restart(p) },
	"unpin":   func(w *world, p *proc, _ string) error { return w.unpin(w.procs[0]) },
	// Snowflake.
	"snow-next": func(w *world, p *proc, _ string) error { return w.snowNext(p) },
	// Every process at once, in the same millisecond: where two holders
	// of one worker ID would collide.
	"snow-all": func(w *world, _ *proc, _ string) error {
		for _, q := range w.procs {
			if err := w.snowNext(q); err != nil {
				return err
			}
		}
		return nil
	},
	"heartbeat": func(w *world, p *proc, _ string) error { w.heartbeat(p); return nil },
	// Faults.
	"skew": func(w *world, p *proc, _ string) error {
		// Clocks disagree and get stepped, back and forward.
		if w.db.steady() {
			w.trace("  clocks held steady around a fence")
			return nil
		}
		d := time.Duration(w.rng.IntN(4001)-2000) * time.Millisecond
		if w.chance(0.3) {
			d = -p.skew()
		}
		p.offset.Add(int64(d))
		return nil
	},
	// NTP brings every clock back to true time.
	"ntp-sync": func(w *world, _ *proc, _ string) error {
		for _, q := range w.procs {
			q.offset.Store(0)
		}
		return nil
	},
	"pause": func(w *world, p *proc, _ string) error {
		p.paused = p.wall().Add(time.Duration(1+w.pick(6000)) * time.Millisecond)
		return nil
	},
	// A clock stepped back past the lease margin, then a renewal from
	// behind: the store must not shorten the lease.
	"step-back": func(w *world, p *proc, _ string) error {
		if w.db.steady() {
			w.trace("  clocks held steady around a fence")
			return nil
		}
		p.offset.Add(-int64(time.Duration(300+w.pick(3000)) * time.Millisecond))
		w.heartbeat(p)
		return nil
	},
	// The store loses history: see db.lose and keep.
	"failover": func(w *world, _ *proc, _ string) error { w.db.lose(true, keepFence|keepCreate); return nil },
	// A second failover within one replication lag of the first loses
	// the first one's fence. An instance that saw it (the one that
	// fenced, or any that reserved since) reaches the store first: its
	// fence adds what the lost one added (fence.Plan.Lost).
	"failover-lose-fence": func(w *world, _ *proc, _ string) error {
		w.db.lose(true, keepCreate)
		w.db.checkFirst()
		return nil
	},
	// The same, reached first by an instance that had not seen the lost
	// fence: the timelines count the failovers (fence.Failovers), and
	// reservations wait until the instances that saw it have checked in
	// (fence.Holding).
	"failover-lose-fence-unseen": func(w *world, _ *proc, _ string) error { w.db.lose(true, keepCreate); return nil },
	"failover-lose-create":       func(w *world, _ *proc, _ string) error { w.db.lose(true, keepFence); return nil },
	// A failover that loses more than maxLost commits, past reservations
	// and renewals of live processes (losable).
	"failover-long": func(w *world, _ *proc, _ string) error {
		w.db.lose(true, keepFence|keepCreate|keepClaim|long)
		return nil
	},
	// A failover within one lag of the last, to a replica that never
	// received the last promotion's history: it may lose that
	// promotion's fence, and on PostgreSQL it reuses its timeline
	// number, so the timelines count one promotion (on MariaDB another
	// server_id, which counts none).
	"failover-reuse": func(w *world, _ *proc, _ string) error { w.db.lose(true, keepCreate|reuse); return nil },
	"restore":        func(w *world, _ *proc, _ string) error { w.db.lose(false, keepFence|keepCreate); return nil },
}

// Weights is an op mix: a weight per op name. Ops it leaves out are never
// picked.
type Weights map[string]int

// DefaultWeights is the mix CI runs: mostly clients and deliveries, with
// a crash, a restart or a lossy failover every hundred steps or so, some
// of which lose the last fence or the last tag created. Restores are
// out: package fence cannot know of one first reached by an instance that
// had not seen what it lost. So are failovers that lose a fence, reached
// first by an instance that had not seen it: the fence's reservation
// hold covers them only while the instance that saw it renews its lease
// within the hold (TestSimulation_LostFenceUnseen, and
// TestSimulation_KnownHoles for the rest).
func DefaultWeights() Weights {
	return Weights{
		"next": 22, "next-n": 8, "next-n-edge": 1, "next-waiting": 2, "reserve-range": 3,
		"unknown-tag": 2, "tag-flood": 1, "create-late": 1,
		"deliver": 20, "tick": 10, "leap": 1, "set-step": 1,
		"crash": 1, "restart": 1, "unpin": 1,
		"snow-next": 6, "snow-all": 3, "heartbeat": 10,
		"skew": 3, "ntp-sync": 2, "pause": 2, "step-back": 5,
		"failover": 2, "failover-lose-fence": 1, "failover-lose-create": 1,
		"failover-long": 1, "failover-reuse": 1,
	}
}

// FailoverWeights is DefaultWeights with the store losing history five
// times as often.
func FailoverWeights() Weights { return DefaultWeights().With(Weights{"failover": 5, "restore": 5}) }

// CalmWeights is DefaultWeights without faults of the store's history:
// no failover, no restore.
func CalmWeights() Weights {
	return DefaultWeights().With(Weights{"failover": 0, "failover-lose-fence": 0, "failover-lose-create": 0, "failover-long": 0, "failover-reuse": 0, "restore": 0})
}

// With returns w with the weights of change replacing its own.
func (w Weights) With(change Weights) Weights {
	out := Weights{}
	for k, v := range w {
		out[k] = v
	}
	for k, v := range change {
		out[k] = v
	}
	return out
}

type weighted struct {
	name   string
	fn     opFunc
	weight int
}

// table is the weights as a list in name order, so that a pick by the
// seed is the same on every run.
func (w Weights) table() ([]weighted, error) {
	if w == nil {
		w = DefaultWeights()
	}
	var out []weighted
	total := 0
	for name, weight := range w {
		fn, ok := opFuncs[name]
		if !ok {
			return nil, fmt.Errorf("sim: unknown op %q in the weights", name)
		}
		if weight < 0 {
			return nil, fmt.Errorf("sim: op %q has a negative weight %d", name, weight)
		}
		if weight > 0 {
			out = append(out, weighted{name, fn, weight})
			total += weight
		}
	}
	if total == 0 {
		return nil, errors.New("sim: every op has weight 0")
	}
	slices.SortFunc(out, func(a, b weighted) int { return cmp.Compare(a.name, b.name) })
	return out, nil
}

// pickOp picks an op by weight.
func (w *world) pickOp() weighted {
	total := 0
	for _, o := range w.ops {
		total += o.weight
	}
	r := w.pick(total)
	for _, o := range w.ops {
		if r < o.weight {
			return o
		}
		r -= o.weight
	}
	panic("unreachable")
}

// once takes one random step.
func (w *world) once() error {
	p := w.procs[w.pick(len(w.procs))]
	tag := tags[w.pick(len(tags))]
	if p.wall().Before(p.paused) && w.chance(0.9) {
		d := time.Duration(w.pick(200)) * time.Millisecond
		w.trace("paused %d.%d %v", p.id, p.inc, d)
		w.advance(d)
		return nil
	}
	o := w.pickOp()
	w.trace("%s %d.%d %s at %v", o.name, p.id, p.inc, tag, time.Since(w.start))
	return o.fn(w, p, tag)
}

func (w *world) next(p *proc, tag string) error {
	id, err := p.alloc.Next(w.cancelled, tag)
	if err != nil {
		return w.checkSegErr(p, tag, err)
	}
	return w.handOut(p, tag, []int64{id})
}

// nextWaiting is a Next with no deadline of its own: when both buffers
// are empty it waits for the load in flight, and segment's WaitTimeout
// ends the wait in simulated time unless a load completes first.
func (w *world) nextWaiting(p *proc, tag string) error {
	id, err := p.alloc.Next(context.Background(), tag)
	if err != nil {
		return w.checkSegErr(p, tag, err)
	}
	return w.handOut(p, tag, []int64{id})
}

func (w *world) nextN(p *proc, tag string, n int) error {
	ids, err := p.alloc.NextN(w.cancelled, tag, n)
	if err != nil {
		if len(ids) != 0 {
			return w.violation("NextN failed with %v but returned %d IDs", err, len(ids))
		}
		return w.checkSegErr(p, tag, err)
	}
	if len(ids) != n {
		return w.violation("NextN(%d) returned %d IDs and no error", n, len(ids))
	}
	return w.handOut(p, tag, ids)
}

// checkSegErr accepts the errors an allocator may return under faults,
// and records a miss for the negative cache's promise.
func (w *world) checkSegErr(p *proc, tag string, err error) error {
	w.trace("  %d.%d %s: %v", p.id, p.inc, tag, err)
	if errors.Is(err, segment.ErrTagNotFound) {
		w.db.mu.Lock()
		w.missed(p, tag)
		w.db.mu.Unlock()
		return nil
	}
	if errors.Is(err, segment.ErrTagLimit) {
		if n := len(p.alloc.Stats()); n < maxTags {
			return w.violation("process %d refused %s at the tag limit holding %d tags, below MaxTags %d", p.id, tag, n, maxTags)
		}
		return nil
	}
	for _, ok := range []error{context.Canceled, segment.ErrUnavailable, segment.ErrExhausted, segment.ErrClosed} {
		if errors.Is(err, ok) {
			return nil
		}
	}
	return w.violation("unexpected allocator error: %v", err)
}

func (w *world) reserveRange(p *proc, tag string, n int64) {
	a, inc := p.alloc, p.inc
	ctx := context.WithValue(context.Background(), originKey{}, fmt.Sprintf("range#%d", w.step))
	go func() {
		r, err := a.ReserveRange(ctx, tag, n)
		w.db.mu.Lock()
		defer w.db.mu.Unlock()
		if errors.Is(err, segment.ErrTagNotFound) && p.inc == inc {
			w.missed(p, tag)
		}
		if err != nil {
			return
		}
		// Checked here, on the client's goroutine, under the mutex; the
		// step waits for it (settle), so the order is still the seed's.
		for id := r.Start; id < r.End; id++ {
			if prev, bad := w.record(tag, id, inc); bad {
				w.db.late(w.violation("ReserveRange gave %s [%d,%d), whose ID %d incarnation %d handed out", tag, r.Start, r.End, id, prev))
				return
			}
		}
	}()
}

// missed records that a caller of p was told tag is unknown (db.mu
// held). The oracle cannot tell a miss the negative cache answered,
// which leaves the allocator's deadline alone, from one the store
// answered, which sets it to now + NegativeTTL, also earlier than before
// if the clock was stepped back. So it keeps bounds on the deadline: the
// check uses the lower one, and a miss past the upper one was the
// store's.
//
// The cache answers lookups by name only: an operation that got past it
// before the miss goes on with the handle it holds, and makes the store
// calls it still has to (the creation and the reservation after a row
// that is not there, as when a failover lost the tag's creation; the
// raise after a regression). Its calls were parked at the miss, as the
// simulator settles every step, so the operations they belong to are
// marked here and their calls are not lookups.
func (w *world) missed(p *proc, tag string) {
	now := p.wall()
	next := now.Add(negativeTTL)
	lo, hi := p.neg[tag], p.negHi[tag]
	if !now.Before(hi) {
		p.forgetInflight(tag)
	}
	for _, o := range w.db.pending {
		if o.inc == p.inc && o.tag == tag {
			p.inflight[inflightKey(tag, o.origin)] = true
		}
	}
	if !now.Before(hi) {
		p.neg[tag], p.negHi[tag] = next, next
		return
	}
	if next.Before(lo) {
		p.neg[tag] = next
	}
	if next.After(hi) {
		p.negHi[tag] = next
	}
}
