package sim

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store"
)

// An op is one kind of step, named for the weight table and the trace;
// its weight is how often it is picked (as in pebble's metamorphic config).
type opFunc func(w *world, p *proc, tag string) error

var opFuncs = map[string]opFunc{
	// Segment clients.
	"next":   func(w *world, p *proc, tag string) error { return w.next(p, tag, 1) },
	"next-n": func(w *world, p *proc, tag string) error { return w.next(p, tag, 1+w.pick(8)) },
	// A range client: it reserves a range and hands its IDs out itself.
	"reserve-range": func(w *world, p *proc, tag string) error { w.reserveRange(p, tag, int64(1+w.pick(30))); return nil },
	// A range client that hands back the rest of two ranges at once.
	"range-hand-back": func(w *world, p *proc, tag string) error { w.rangeHandBack(p, tag, int64(2+w.pick(20))); return nil },
	// The store and time.
	"deliver": func(w *world, _ *proc, _ string) error { return w.deliverOne() },
	"tick": func(w *world, _ *proc, _ string) error {
		w.advance(time.Duration(w.pick(600)) * time.Millisecond)
		return nil
	},
	"leap": func(w *world, _ *proc, _ string) error {
		w.advance(time.Duration(1+w.pick(4)) * time.Second)
		return nil
	},
	// Processes.
	"crash":    func(w *world, p *proc, _ string) error { return w.crash(p) },
	"shutdown": func(w *world, p *proc, _ string) error { return w.shutdown(p) },
	// A graceful shutdown only during a fence's hold.
	"shutdown-in-hold": func(w *world, p *proc, _ string) error {
		if time.Since(time.Unix(0, w.lastFence.Load())) <= leaseTTL*11/10 {
			return w.shutdown(p)
		}
		return nil
	},
	// A pause short of the TTL, or one past it: the leases lapse.
	"pause": func(w *world, p *proc, _ string) error {
		w.pause(p, time.Duration(200+w.pick(2*int(leaseTTL/time.Millisecond)))*time.Millisecond)
		return nil
	},
	"snow-next": func(w *world, p *proc, _ string) error { return w.snowNext(p) },
	// A lock client: takes lock L, renews it or releases it.
	"lock": func(w *world, p *proc, _ string) error { return w.lock(p) },
	// Every process in one millisecond: where two holders would collide.
	"snow-all": func(w *world, _ *proc, _ string) error {
		for _, q := range w.awake() {
			if err := w.snowNext(q); err != nil {
				return err
			}
		}
		return nil
	},
	"heartbeat":       func(w *world, p *proc, _ string) error { w.heartbeat(p); return nil },
	"static-one-shot": func(w *world, _ *proc, _ string) error { return w.staticOneShot() },
	// Clocks within TTL/20 of true time: the documented TTL/10 between two.
	"skew": func(w *world, p *proc, _ string) error {
		ms := w.pick(int(leaseTTL/10/time.Millisecond) + 1)
		p.offset.Store(int64(time.Duration(ms)*time.Millisecond - leaseTTL/20))
		return nil
	},
	// One-shot commands, as `idgen tag create|bump|step` run them.
	"cli-create": func(w *world, _ *proc, _ string) error {
		if err := w.snapshot(snapCreate); err != nil {
			return err
		}
		w.cli("create late", func(ctx context.Context, s *store.Store) error {
			return s.CreateTag(ctx, segment.Tag{Name: "late", MaxID: 1, Step: 10})
		})
		return nil
	},
	"cli-bump": func(w *world, _ *proc, tag string) error {
		w.cli("bump "+tag, func(ctx context.Context, s *store.Store) error {
			_, err := s.Bump(ctx, tag, int64(1+w.pick(100)))
			return err
		})
		return nil
	},
	"cli-step": func(w *world, _ *proc, tag string) error {
		step := int64(1 + w.pick(40))
		w.cli(fmt.Sprintf("step %s %d", tag, step), func(ctx context.Context, s *store.Store) error { return s.SetStep(ctx, tag, step) })
		return nil
	},
	// The history: see history.go.
	"snap":          func(w *world, _ *proc, _ string) error { return w.snapshot(snapPlain) },
	"failover":      func(w *world, _ *proc, _ string) error { return w.lose(lossWhole, true) },
	"restore":       func(w *world, _ *proc, _ string) error { return w.lose(lossWhole, false) },
	"restore-table": func(w *world, _ *proc, _ string) error { return w.lose(lossTable, false) },
	// A restore checked at once by the last reserver, which saw it and fences.
	"restore-checked": func(w *world, _ *proc, _ string) error {
		if p := w.seen.Load(); p != nil && !p.paused.Load() {
			if err := w.lose(lossWhole, false); err != nil {
				return err
			}
			w.trace("  check %d.%d: %v", p.id, p.inc, p.s.CheckIdentity(context.Background()))
		}
		return nil
	},
	// A failover that a one-shot command (`idgen tag list`) sees first.
	"failover-cli": func(w *world, _ *proc, _ string) error {
		err := w.lose(lossWhole, true)
		w.cli("list", func(ctx context.Context, s *store.Store) error { return s.CheckIdentity(ctx) })
		return err
	},
	"failover-lose-create": func(w *world, _ *proc, _ string) error { return w.lose(lossCreate, true) },
	// A failover that loses no creation (a lost one is the tag floor's).
	"failover-keep-create": func(w *world, _ *proc, _ string) error { return w.lose(lossKeepCreate, true) },
}

// Weights is an op mix: a weight per op name; ops left out are never picked.
type Weights map[string]int

// DefaultWeights is the mix CI runs: mostly clients, deliveries and
// time, with a crash, a shutdown, a pause or a failover every 50 steps.
func DefaultWeights() Weights {
	return Weights{
		"next": 20, "next-n": 8, "reserve-range": 3, "range-hand-back": 2,
		"deliver": 35, "tick": 10, "leap": 1,
		"crash": 1, "shutdown": 1, "pause": 1,
		"snow-next": 6, "snow-all": 3, "heartbeat": 10, "skew": 3, "static-one-shot": 1,
		"cli-create": 1, "cli-bump": 1, "cli-step": 1,
		"snap": 6, "failover": 1,
	}
}

// With returns w with the weights of change replacing its own.
func (w Weights) With(change Weights) Weights {
	out := Weights{}
	maps.Copy(out, w)
	maps.Copy(out, change)
	return out
}

type weighted struct {
	name   string
	fn     opFunc
	weight int
}

// table is the weights in name order: a pick by the seed is the same on every run.
func (w Weights) table() ([]weighted, error) {
	if w == nil {
		w = DefaultWeights()
	}
	var out []weighted
	for name, weight := range w {
		fn, ok := opFuncs[name]
		if !ok {
			return nil, fmt.Errorf("%w: unknown op %q in the weights", ErrConfig, name)
		}
		if weight < 0 {
			return nil, fmt.Errorf("%w: op %q has a negative weight %d", ErrConfig, name, weight)
		}
		if weight > 0 {
			out = append(out, weighted{name, fn, weight})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: every op has weight 0", ErrConfig)
	}
	slices.SortFunc(out, func(a, b weighted) int { return cmp.Compare(a.name, b.name) })
	return out, nil
}

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

// awake is the processes not paused: a paused process takes no step.
func (w *world) awake() []*proc {
	return slices.DeleteFunc(slices.Clone(w.procs), func(p *proc) bool { return p.paused.Load() })
}

// once takes one random step.
func (w *world) once() error {
	awake := w.awake()
	if len(awake) == 0 {
		w.trace("all paused")
		w.advance(time.Duration(1+w.pick(200)) * time.Millisecond)
		return nil
	}
	p := awake[w.pick(len(awake))]
	tag := w.pickTag()
	o := w.pickOp()
	w.trace("%s %d.%d %s at %v", o.name, p.id, p.inc, tag, time.Since(w.start))
	return o.fn(w, p, tag)
}

// pickTag picks mostly a and b; the exhausted edge and late (maybe absent) less.
func (w *world) pickTag() string {
	switch r := w.pick(20); {
	case r < 8:
		return "a"
	case r < 14:
		return "b"
	case r < 17:
		return "late"
	}
	return "edge"
}

func (w *world) next(p *proc, tag string, n int) error {
	ids, err := p.alloc.NextN(w.nowait, tag, n)
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

// reserveRange runs a range client: the range is handed out on its goroutine.
func (w *world) reserveRange(p *proc, tag string, n int64) {
	a, inc := p.alloc, p.inc
	ctx := context.WithValue(context.Background(), originKey{}, fmt.Sprintf("range#%d", w.step))
	go func() {
		if r, err := a.ReserveRange(ctx, tag, n); err == nil {
			w.handOutRange(inc, tag, r.Start, r.End)
		}
	}()
}

// rangeHandBack uses the first ID of two ranges and hands back both rests at once.
func (w *world) rangeHandBack(p *proc, tag string, n int64) {
	a, inc := p.alloc, p.inc
	ctx := context.WithValue(context.Background(), originKey{}, fmt.Sprintf("hand-back#%d", w.step))
	go func() {
		r1, err := a.ReserveRange(ctx, tag, n)
		if err != nil || !w.handOutRange(inc, tag, r1.Start, r1.Start+1) {
			return
		}
		r2, err := a.ReserveRange(ctx, tag, n)
		if err != nil {
			return
		}
		done := make(chan struct{})
		go func() { defer close(done); _, _ = a.ReleaseRange(ctx, tag, r2.Start, r2.End) }()
		_, _ = a.ReleaseRange(ctx, tag, r1.Start+1, r1.End)
		<-done
	}()
}

type lossKind int

const (
	lossWhole      lossKind = iota // every table back to the snapshot
	lossTable                      // id_sequence alone
	lossCreate                     // every table, to just before a tag's creation
	lossKeepCreate                 // every table, to after the last creation
)

// maxLost bounds the commits a loss goes back: the lag the margin is sized for.
const maxLost = 8

// lose puts the database back to the oldest snapshot within maxLost commits
// (lossCreate: the newest before a creation), with a new store_id if failover.
func (w *world) lose(kind lossKind, failover bool) error {
	now := w.commitCount()
	// Losses of the create kinds keep every claim: a lost claim's process is
	// invisible to a fence until it renews, and only the margin covers it.
	floor := 0
	for j, s := range w.hist.snaps {
		if kind >= lossCreate && s.kind == snapClaim || kind == lossKeepCreate && s.kind == snapCreate {
			floor = j + 1
		}
	}
	i := slices.IndexFunc(w.hist.snaps[floor:], func(s snapshot) bool {
		return now-s.commits <= maxLost && (kind != lossCreate || s.kind == snapCreate)
	})
	if i < 0 {
		w.trace("  no snapshot within %d commits", maxLost)
		return nil
	}
	i += floor
	s := w.hist.snaps[i]
	var tables []string
	if kind == lossTable {
		tables = []string{"id_sequence"}
	}
	id := ""
	if failover {
		id = fmt.Sprintf("history-%d-%d", w.cfg.Seed, w.step)
	}
	w.res.Losses++
	w.lost.Store(true)
	w.res.LostCommits += now - s.commits
	w.trace("  lose %d commits back to %s (tables %v, store_id %q)", now-s.commits, filepath.Base(s.path), tables, id)
	if err := w.hist.restore(context.Background(), s, tables, id); err != nil {
		return err
	}
	// The snapshots after it are of a history that is gone.
	w.hist.snaps = w.hist.snaps[:i+1]
	w.mu.Lock()
	w.commits = s.commits
	w.mu.Unlock()
	return nil
}
