// Package sim is a deterministic simulation of idgen's two protocols, in
// the style FoundationDB and TigerBeetle made known: one seeded random
// source drives several simulated processes, each with a segment
// allocator and a leased snowflake generator, over an in-memory segment
// table and lease table and simulated clocks, and injects faults between
// every step. After every step it checks the promises idgen makes: no ID
// handed out twice, IDs strictly increasing per process and tag, every
// segment ID inside a range the store reserved for its process, and, once
// the faults stop, progress.
//
// The code under test is the real segment and snowflake packages. What
// makes a run replay exactly from its seed is that nothing happens unless
// the simulator lets it:
//   - Every store call parks until the simulator completes it, in an order
//     it picks from the seed, with a fault or without.
//   - After each step the simulator waits until every goroutine the step
//     started (background loads, Close, ReserveRange) has either finished
//     or parked at the store, so the state it looks at next is the same
//     on every run.
//   - Callers pass an already-cancelled context, so a call that would wait
//     for a load returns at once instead of racing it.
//   - Time is simulated: clocks move only when the simulator moves them,
//     or when a generator sleeps on its clock.
//   - Snowflake heartbeats run on the simulator's goroutine
//     (LeasedConfig.RenewInterval < 0).
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/snowflake/snowflaketest"
)

// Config is one simulation run.
type Config struct {
	// Trace, if set, is told what each step does: for replaying a seed.
	Trace func(step int, what string)
	Seed  uint64
	Steps int // steps with faults, before the calm phase
	Procs int // simulated processes; default 3
}

// Result is what a run did.
type Result struct {
	Steps        int
	SegmentIDs   int // distinct segment IDs handed out
	SnowflakeIDs int // distinct snowflake IDs handed out
	Reservations int // segment reservations committed
	Regressions  int // ranges below a high-water mark, skipped
	Rollbacks    int // lost commits injected
	// LostToRollback counts IDs handed out again by a different process
	// after a rollback lowered max_id below them: the one duplicate no
	// allocator can see, which docs/deploy.md's "tag bump" repairs.
	LostToRollback int
	Crashes        int
	Takeovers      int // snowflake leases claimed by a new owner
}

// Violation is a broken promise, with the seed and step that replay it.
type Violation struct {
	Seed uint64
	Step int
	Msg  string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("sim: seed %d, step %d: %s", v.Seed, v.Step, v.Msg)
}

// tags are the segment tags every process uses. edge starts a few
// reservations below the int64 limit.
var tags = []string{"a", "b", "edge"}

const edgeStart = math.MaxInt64 - 3*10 - 7

// Run runs one simulation. It returns a *Violation if a promise broke, or
// another error if the simulation itself got stuck.
func Run(cfg Config) (Result, error) {
	if cfg.Procs == 0 {
		cfg.Procs = 3
	}
	w := &world{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		start:  time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC),
		rows:   map[string]*row{},
		segIDs: map[tagID]int{}, reissued: map[tagID]int{},
		snow:   map[int64]int{},
		leases: snowflaketest.NewMemLeaseStore(),
	}
	w.now = w.start
	w.faults = true
	w.rows["edge"] = &row{maxID: edgeStart, step: 10, history: []int64{edgeStart}}
	for i := range cfg.Procs {
		p := &proc{id: i, w: w}
		w.procs = append(w.procs, p)
		if err := w.boot(p); err != nil {
			return w.res, err
		}
	}
	err := w.run()
	w.shutdown()
	for _, p := range w.procs {
		w.res.Regressions += int(p.obs.regressions.Load())
	}
	w.res.SegmentIDs, w.res.SnowflakeIDs = len(w.segIDs), len(w.snow)
	return w.res, err
}

type world struct {
	cfg    Config
	rng    *rand.Rand
	step   int
	faults bool
	res    Result

	tmu   sync.Mutex // guards now: generators read it from load goroutines
	start time.Time
	now   time.Time

	mu      sync.Mutex // guards rows, pending, ranges of every proc
	rows    map[string]*row
	pending []*op
	clients atomic.Int64 // client goroutines (Close, ReserveRange) not yet done
	lateErr error        // a violation found on a client goroutine

	procs    []*proc
	incs     int
	segIDs   map[tagID]int // segment ID -> incarnation that handed it out last
	reissued map[tagID]int // segment ID -> holders a rollback explained
	snow     map[int64]int // snowflake ID -> incarnation
	atRisk   []span        // ranges a rollback exposed

	leases *snowflaketest.MemLeaseStore
}

// tagID is a segment ID; each tag is a space of its own.
type tagID struct {
	tag string
	id  int64
}

type row struct {
	maxID, step int64
	history     []int64 // every max_id value, for rollbacks
}

type span struct {
	tag      string
	from, to int64
}

// proc is a simulated process; each restart is a new incarnation with a
// fresh allocator and generator, as after a crash.
type proc struct {
	id, inc int
	w       *world
	offset  time.Duration // wall clock error
	paused  time.Time     // takes no step before this (a GC pause)
	alloc   *segment.Allocator
	dead    atomic.Bool // the incarnation crashed: store calls fail
	obs     *observer
	ranges  map[string][]segment.Range // reserved for this incarnation
	last    map[string]int64           // last segment ID per tag
	gen     *snowflake.Leased          // nil until a claim succeeded
	owner   string
	lastSF  int64
	static  bool
	// stocked marks tags whose buffers had IDs left when the calm phase
	// began: none of their takes may wait for a load. Others may once.
	stocked map[string]bool
}

type observer struct {
	waits       map[string]int
	regressions atomic.Int64
	mu          sync.Mutex
}

func (o *observer) SegmentLoaded(string, int64, time.Duration, error) {}
func (o *observer) WaitedForLoad(tag string) {
	o.mu.Lock()
	o.waits[tag]++
	o.mu.Unlock()
}
func (o *observer) SegmentRegressed(string, segment.Range, int64) { o.regressions.Add(1) }

func (o *observer) waited(tag string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.waits[tag]
}

// The process's clocks: a wall clock that may be off, and a monotonic one
// that is the simulation's time.
func (p *proc) wall() time.Time {
	p.w.tmu.Lock()
	defer p.w.tmu.Unlock()
	return p.w.now.Add(p.offset)
}

type procClock struct{ p *proc }

func (c procClock) Now() (time.Time, time.Duration) {
	c.p.w.tmu.Lock()
	defer c.p.w.tmu.Unlock()
	return c.p.w.now.Add(c.p.offset), c.p.w.now.Sub(c.p.w.start) + time.Hour
}

func (c procClock) Sleep(d time.Duration) { c.p.w.advance(max(d, 0)) }

func (w *world) advance(d time.Duration) {
	w.tmu.Lock()
	w.now = w.now.Add(d)
	w.tmu.Unlock()
}

func (w *world) trace(format string, args ...any) {
	if w.cfg.Trace != nil {
		w.cfg.Trace(w.step, fmt.Sprintf(format, args...))
	}
}

func (w *world) violation(format string, args ...any) error {
	return &Violation{Seed: w.cfg.Seed, Step: w.step, Msg: fmt.Sprintf(format, args...)}
}

// boot starts a new incarnation of p.
func (w *world) boot(p *proc) error {
	w.incs++
	p.inc = w.incs
	if p.obs != nil {
		w.res.Regressions += int(p.obs.regressions.Load())
	}
	p.dead.Store(false)
	p.obs = &observer{waits: map[string]int{}}
	w.mu.Lock()
	p.ranges = map[string][]segment.Range{}
	w.mu.Unlock()
	p.last = map[string]int64{}
	p.lastSF = 0
	a, err := segment.New(&store{p: p, inc: p.inc}, &segment.Options{
		AutoCreate: true, DefaultStep: 10,
		// Real-time timers must never fire: the simulation decides.
		WaitTimeout: 24 * time.Hour, LoadTimeout: 24 * time.Hour, ReleaseTimeout: 24 * time.Hour,
		MinBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second,
		GrowBelow: 2 * time.Second, ShrinkAbove: 4 * time.Second, MaxStep: 640,
		Observer: p.obs, Now: p.wall,
	})
	if err != nil {
		return err
	}
	p.alloc = a
	p.owner = fmt.Sprintf("p%d.%d", p.id, p.inc)
	p.gen = nil
	p.static = p.id == 0 // process 0 runs with a static worker ID
	w.claim(p)
	return nil
}

// layout has 4 worker IDs for 3 or more processes, so that takeovers are
// frequent.
func (w *world) leasedConfig(p *proc) snowflake.LeasedConfig {
	cfg := snowflake.LeasedConfig{
		Owner: p.owner, TTL: 3 * time.Second, RenewInterval: -1, Margin: 300 * time.Millisecond,
		Generator: snowflake.Config{TimeBits: 41, WorkerBits: 2, SequenceBits: 20, Clock: procClock{p}},
	}
	if p.static {
		cfg.Static, cfg.Generator.WorkerID = true, 3
	}
	return cfg
}

func (w *world) claim(p *proc) {
	before := w.leaseHolders()
	g, err := snowflake.NewLeased(context.Background(), faultyLeases{w: w}, w.leasedConfig(p))
	if err == nil {
		p.gen = g
		w.countTakeover(before, g.WorkerID())
	}
}

func (w *world) leaseHolders() map[int64]string {
	ws, _ := w.leases.Workers(context.Background())
	out := map[int64]string{}
	for _, l := range ws {
		out[l.WorkerID] = l.Owner
	}
	return out
}

func (w *world) countTakeover(before map[int64]string, id int64) {
	if o, ok := before[id]; ok && o != "" {
		w.res.Takeovers++
	}
}

func (w *world) run() error {
	for w.step = 1; w.step <= w.cfg.Steps; w.step++ {
		if err := w.once(); err != nil {
			return err
		}
		if err := w.quiesce(); err != nil {
			return err
		}
	}
	return w.calm()
}

func (w *world) pick(n int) int { return w.rng.IntN(n) }

func (w *world) chance(p float64) bool { return w.rng.Float64() < p }

// once takes one random step.
func (w *world) once() error {
	p := w.procs[w.pick(len(w.procs))]
	tag := tags[w.pick(len(tags))]
	defer func() { w.trace("process %d.%d tag %s at %v", p.id, p.inc, tag, w.now.Sub(w.start)) }()
	if p.wall().Before(p.paused) && w.chance(0.9) {
		w.advance(time.Duration(w.pick(200)) * time.Millisecond)
		return nil
	}
	switch r := w.pick(100); {
	case r < 22:
		return w.next(p, tag)
	case r < 30:
		return w.nextN(p, tag, 1+w.pick(40))
	case r < 33 && tag == "edge":
		return w.nextN(p, tag, 1000+w.pick(5000))
	case r < 36:
		w.reserveRange(p, tag, int64(1+w.pick(30)))
	case r < 56:
		w.deliverOne()
	case r < 66:
		w.advance(time.Duration(w.pick(300)) * time.Millisecond)
	case r < 67:
		w.advance(time.Duration(1+w.pick(8)) * time.Second)
	case r < 68:
		w.setStep(tag, int64(1+w.pick(40)))
	case r < 69:
		return w.crash(p)
	case r < 70:
		return w.restart(p)
	case r < 71 && w.faults:
		w.rollback(tag)
	case r < 77:
		return w.snowNext(p)
	case r < 80:
		// Every process at once, in the same millisecond: where two
		// holders of one worker ID would collide.
		for _, q := range w.procs {
			if err := w.snowNext(q); err != nil {
				return err
			}
		}
	case r < 90:
		w.heartbeat(p)
	case r < 93 && w.faults:
		// Clocks disagree and get stepped, back and forward.
		p.offset += time.Duration(w.rng.IntN(4001)-2000) * time.Millisecond
		if w.chance(0.1) {
			p.offset = 0
		}
	case r < 95 && w.faults:
		p.paused = p.wall().Add(time.Duration(1+w.pick(6000)) * time.Millisecond)
	case w.faults:
		// A clock stepped back past the lease margin, then a renewal
		// from behind: the store must not shorten the lease.
		p.offset -= time.Duration(300+w.pick(3000)) * time.Millisecond
		w.heartbeat(p)
	}
	return nil
}

var cancelled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

func (w *world) next(p *proc, tag string) error {
	id, err := p.alloc.Next(cancelled, tag)
	if err != nil {
		return w.checkSegErr(err)
	}
	return w.handOut(p, tag, []int64{id})
}

func (w *world) nextN(p *proc, tag string, n int) error {
	ids, err := p.alloc.NextN(cancelled, tag, n)
	if err != nil {
		if len(ids) != 0 {
			return w.violation("NextN failed with %v but returned %d IDs", err, len(ids))
		}
		return w.checkSegErr(err)
	}
	if len(ids) != n {
		return w.violation("NextN(%d) returned %d IDs and no error", n, len(ids))
	}
	return w.handOut(p, tag, ids)
}

func (w *world) checkSegErr(err error) error {
	for _, ok := range []error{context.Canceled, segment.ErrUnavailable, segment.ErrExhausted, segment.ErrClosed} {
		if errors.Is(err, ok) {
			return nil
		}
	}
	return w.violation("unexpected allocator error: %v", err)
}

// handOut records IDs a process handed out and checks every promise about
// them.
func (w *world) handOut(p *proc, tag string, ids []int64) error {
	w.mu.Lock()
	ranges := p.ranges[tag]
	w.mu.Unlock()
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

// record notes that incarnation inc handed out a segment ID, and reports
// a duplicate that no injected rollback explains, with the incarnation
// that had it before. Each rollback that lowered max_id below the ID
// explains one more holder of it, never the same incarnation twice: the
// one duplicate no allocator can see (see Result.LostToRollback).
func (w *world) record(tag string, id int64, inc int) (prev int, bad bool) {
	k := tagID{tag, id}
	prev, dup := w.segIDs[k]
	if dup {
		exposures := 0
		for _, s := range w.atRisk {
			if s.tag == tag && s.from <= id && id < s.to {
				exposures++
			}
		}
		if prev == inc || w.reissued[k] >= exposures {
			return prev, true
		}
		w.reissued[k]++
		w.res.LostToRollback++
	}
	w.segIDs[k] = inc
	return prev, false
}

func (w *world) reserveRange(p *proc, tag string, n int64) {
	w.clients.Add(1)
	a, inc := p.alloc, p.inc
	ctx := context.WithValue(context.Background(), originKey{}, fmt.Sprintf("range#%d", w.step))
	go func() {
		defer w.clients.Add(-1)
		r, err := a.ReserveRange(ctx, tag, n)
		if err != nil {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		// Checked here, on the client's goroutine, under mu; the step
		// waits for it (quiesce), so the order is still the seed's.
		for id := r.Start; id < r.End; id++ {
			if prev, bad := w.record(tag, id, inc); bad {
				w.lateErr = w.violation("ReserveRange gave %s [%d,%d), whose ID %d incarnation %d handed out", tag, r.Start, r.End, id, prev)
				return
			}
		}
	}()
}

func (w *world) setStep(tag string, step int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r, ok := w.rows[tag]; ok {
		r.step = step
	}
}

// rollback loses the last commits of a tag, as a restore or a failover to
// an asynchronous replica would.
func (w *world) rollback(tag string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.rows[tag]
	if !ok || len(r.history) < 2 {
		return
	}
	back := 1 + w.pick(min(len(r.history)-1, 4))
	to := r.history[len(r.history)-1-back]
	if to >= r.maxID {
		return
	}
	w.atRisk = append(w.atRisk, span{tag, to, r.maxID})
	r.maxID = to
	r.history = append(r.history, to)
	w.res.Rollbacks++
}

// crash ends an incarnation with no goodbye: its store calls fail, its
// lease is left to expire, and a new incarnation starts.
func (w *world) crash(p *proc) error {
	w.res.Crashes++
	p.dead.Store(true)
	w.mu.Lock()
	for _, o := range w.pending {
		if o.inc == p.inc {
			o.fail = true
		}
	}
	w.mu.Unlock()
	w.deliverAll(false, func(o *op) bool { return o.inc == p.inc }) // they fail
	old := p.alloc
	w.clients.Add(1)
	go func() { defer w.clients.Add(-1); _ = old.Close() }() // frees goroutines; calls fail at once
	if err := w.quiesce(); err != nil {
		return err
	}
	return w.boot(p)
}

// restart is a graceful stop (ranges and the lease handed back) and a new
// incarnation, overlapping as in a rolling update.
func (w *world) restart(p *proc) error {
	old, gen := p.alloc, p.gen
	w.clients.Add(1)
	ctx := context.WithValue(context.Background(), originKey{}, fmt.Sprintf("close#%d", w.step))
	go func() { defer w.clients.Add(-1); _ = old.Shutdown(ctx) }()
	if gen != nil {
		_ = gen.Close(context.Background())
	}
	if err := w.quiesce(); err != nil {
		return err
	}
	// The old incarnation's hand-backs may still be in flight.
	return w.boot(p)
}

func (w *world) snowNext(p *proc) error {
	if p.gen == nil {
		return nil
	}
	id, err := p.gen.Next(context.Background(), "t")
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

func (w *world) heartbeat(p *proc) {
	if p.gen == nil {
		w.claim(p)
		return
	}
	before := w.leaseHolders()
	held := p.gen.WorkerID()
	if err := p.gen.Heartbeat(context.Background()); err == nil && held < 0 {
		w.countTakeover(before, p.gen.WorkerID())
	}
}

// faultyLeases is the shared lease table, failing now and then before or
// after the change (a lost acknowledgement), as the simulation picks.
type faultyLeases struct{ w *world }

var errInjected = errors.New("sim: injected store failure")

func (f faultyLeases) fault(apply func() error) error {
	w := f.w
	if w.faults {
		switch r := w.pick(100); {
		case r < 8:
			return errInjected
		case r < 14:
			_ = apply()
			return fmt.Errorf("%w after commit", errInjected)
		}
	}
	return apply()
}

func (f faultyLeases) Claim(ctx context.Context, owner string, now time.Time, ttl time.Duration, maxWorkers int64) (l snowflake.Lease, err error) {
	err = f.fault(func() error { l, err = f.w.leases.Claim(ctx, owner, now, ttl, maxWorkers); return err })
	return l, err
}

func (f faultyLeases) ClaimStatic(ctx context.Context, owner string, id int64, now time.Time, ttl time.Duration) (l snowflake.Lease, err error) {
	err = f.fault(func() error { l, err = f.w.leases.ClaimStatic(ctx, owner, id, now, ttl); return err })
	return l, err
}

func (f faultyLeases) Renew(ctx context.Context, lease snowflake.Lease, now, last time.Time, ttl time.Duration) (l snowflake.Lease, err error) {
	err = f.fault(func() error { l, err = f.w.leases.Renew(ctx, lease, now, last, ttl); return err })
	return l, err
}

func (f faultyLeases) Release(ctx context.Context, lease snowflake.Lease, last time.Time) error {
	return f.fault(func() error { return f.w.leases.Release(ctx, lease, last) })
}

func (f faultyLeases) Unpin(ctx context.Context, id int64) error { return f.w.leases.Unpin(ctx, id) }

// calm stops every fault and checks that both protocols make progress:
// each process gets a snowflake ID and segment IDs of every tag but the
// exhausted one, and no take that had a buffer with IDs left waits.
func (w *world) calm() error {
	w.faults = false
	for _, p := range w.procs {
		p.offset, p.paused = 0, time.Time{}
	}
	w.deliverAll(false, nil)
	if err := w.quiesce(); err != nil {
		return err
	}
	w.advance(10 * time.Second) // past every backoff and lease
	for _, p := range w.procs {
		p.stocked = map[string]bool{}
		for _, st := range p.alloc.Stats() {
			c := st.Current
			p.stocked[st.Tag] = st.Next != nil || st.Loading || c.Pos < c.End
		}
	}
	for _, p := range w.procs {
		for try := 0; ; try++ {
			if p.gen != nil && p.gen.Ready() == nil {
				break
			}
			if try == 20 {
				return w.violation("process %d: no snowflake worker 20 heartbeats after the faults stopped", p.id)
			}
			w.heartbeat(p)
			w.advance(time.Second)
		}
		if err := w.snowNext(p); err != nil {
			return err
		}
		for _, tag := range tags[:2] {
			for i := range 50 {
				before := p.obs.waited(tag)
				if err := w.calmTake(p, tag); err != nil {
					return err
				}
				if p.obs.waited(tag) > before && (i > 0 || p.stocked[tag]) {
					return w.violation("process %d, tag %s: take %d after the faults stopped waited for a load: a prefetch was never started", p.id, tag, i)
				}
			}
		}
	}
	return nil
}

// calmTake takes one ID, completing store calls until it gets one.
func (w *world) calmTake(p *proc, tag string) error {
	for try := 0; try < 10; try++ {
		id, err := p.alloc.Next(cancelled, tag)
		if err == nil {
			// Loads complete at once now, as on a healthy store.
			w.deliverAll(false, nil)
			return w.handOut(p, tag, []int64{id})
		}
		if err := w.checkSegErr(err); err != nil {
			return err
		}
		w.trace("calm take %d.%d %s: %v %+v", p.id, p.inc, tag, err, p.alloc.Stats())
		w.deliverAll(false, nil)
		if err := w.quiesce(); err != nil {
			return err
		}
		w.advance(100 * time.Millisecond)
	}
	return w.violation("process %d, tag %s: no ID after the faults stopped", p.id, tag)
}

func (w *world) shutdown() {
	w.faults = false
	for _, p := range w.procs {
		p.dead.Store(true)
	}
	w.deliverAll(false, nil)
	for _, p := range w.procs {
		_ = p.alloc.Close()
		if p.gen != nil {
			_ = p.gen.Close(context.Background())
		}
	}
	w.deliverAll(false, nil)
}

// ---- the segment store ----

type originKey struct{}

type opKind int

const (
	opReserve opKind = iota
	opCreate
	opRelease
	opRaise
)

type op struct {
	inc    int
	origin string
	kind   opKind
	tag    string
	a, b   int64 // step; from, to; to
	fail   bool  // fail without applying (the caller's process died)
	result chan opResult
}

type opResult struct {
	r   segment.Range
	ok  bool
	err error
}

// store is one incarnation's handle on the simulated id_sequence table.
type store struct {
	p   *proc
	inc int
}

func (s *store) call(ctx context.Context, o *op) opResult {
	if s.p.inc != s.inc || s.p.dead.Load() {
		return opResult{err: errors.New("sim: process is gone")}
	}
	o.inc = s.inc
	o.origin, _ = ctx.Value(originKey{}).(string)
	if o.origin == "" {
		o.origin = "load"
	}
	o.result = make(chan opResult, 1)
	w := s.p.w
	w.mu.Lock()
	w.pending = append(w.pending, o)
	w.mu.Unlock()
	select {
	case r := <-o.result:
		return r
	case <-ctx.Done():
		w.mu.Lock()
		w.pending = slices.DeleteFunc(w.pending, func(x *op) bool { return x == o })
		w.mu.Unlock()
		return opResult{err: ctx.Err()}
	}
}

func (s *store) Reserve(ctx context.Context, tag string, step int64) (segment.Range, error) {
	r := s.call(ctx, &op{kind: opReserve, tag: tag, a: step})
	return r.r, r.err
}

func (s *store) CreateTag(ctx context.Context, t segment.Tag) error {
	if err := segment.CheckTag(t); err != nil {
		return err
	}
	return s.call(ctx, &op{kind: opCreate, tag: t.Name, a: t.MaxID, b: t.Step}).err
}

func (s *store) Release(ctx context.Context, tag string, from, to int64) (bool, error) {
	r := s.call(ctx, &op{kind: opRelease, tag: tag, a: from, b: to})
	return r.ok, r.err
}

func (s *store) Raise(ctx context.Context, tag string, to int64) (bool, error) {
	r := s.call(ctx, &op{kind: opRaise, tag: tag, a: to})
	return r.ok, r.err
}

// sortPending orders the pending calls by who made them, so that a pick
// by index is the same on every run whatever order goroutines parked in.
func (w *world) sortPending() {
	slices.SortFunc(w.pending, func(x, y *op) int {
		if x.inc != y.inc {
			return x.inc - y.inc
		}
		if c := strings.Compare(x.origin, y.origin); c != 0 {
			return c
		}
		if c := strings.Compare(x.tag, y.tag); c != 0 {
			return c
		}
		return int(x.kind) - int(y.kind)
	})
}

// deliverOne completes one pending store call, picked by the seed, with a
// fault or without.
func (w *world) deliverOne() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return
	}
	w.sortPending()
	i := w.pick(len(w.pending))
	o := w.pending[i]
	w.pending = slices.Delete(w.pending, i, i+1)
	w.complete(o, w.faults)
	w.trace("deliver %+v", *o)
}

// deliverAll completes every pending call that only selects (all if
// only is nil), and those they lead to, in order; with faults if asked.
func (w *world) deliverAll(faults bool, only func(*op) bool) {
	for range 100 {
		if w.quiesce() != nil {
			return
		}
		w.mu.Lock()
		w.sortPending()
		i := slices.IndexFunc(w.pending, func(o *op) bool { return only == nil || only(o) })
		if i < 0 {
			w.mu.Unlock()
			return
		}
		o := w.pending[i]
		w.pending = slices.Delete(w.pending, i, i+1)
		w.complete(o, faults)
		w.mu.Unlock()
	}
}

// complete applies o (w.mu held) and answers its caller.
func (w *world) complete(o *op, faults bool) {
	var res opResult
	defer func() {
		w.trace("  completed %d %s %s kind %d a=%d b=%d: %+v %v", o.inc, o.origin, o.tag, o.kind, o.a, o.b, res.r, res.err)
	}()
	if o.fail {
		o.result <- opResult{err: errors.New("sim: connection closed")}
		return
	}
	fault := 0
	if faults {
		switch r := w.pick(100); {
		case r < 10:
			fault = 1 // fails before the commit
		case r < 15:
			fault = 2 // commits, but the answer is lost (a timeout)
		}
	}
	if fault == 1 {
		o.result <- opResult{err: errInjected}
		return
	}
	res = w.apply(o)
	if fault == 2 {
		res = opResult{err: fmt.Errorf("%w after commit", errInjected)}
	}
	o.result <- res
}

func (w *world) apply(o *op) opResult {
	r, ok := w.rows[o.tag]
	if o.kind == opCreate {
		if ok {
			return opResult{err: fmt.Errorf("%w: %q", segment.ErrTagExists, o.tag)}
		}
		w.rows[o.tag] = &row{maxID: o.a, step: o.b, history: []int64{o.a}}
		return opResult{}
	}
	if !ok {
		return opResult{err: fmt.Errorf("%w: %q", segment.ErrTagNotFound, o.tag)}
	}
	set := func(v int64) {
		r.maxID = v
		r.history = append(r.history, v)
		if len(r.history) > 16 {
			r.history = r.history[len(r.history)-16:]
		}
	}
	switch o.kind {
	case opReserve:
		step := max(o.a, r.step)
		if r.maxID > math.MaxInt64-step {
			return opResult{err: fmt.Errorf("%w: %q", segment.ErrExhausted, o.tag)}
		}
		rg := segment.Range{Start: r.maxID, End: r.maxID + step, Step: r.step}
		set(rg.End)
		w.res.Reservations++
		for _, p := range w.procs {
			if p.inc == o.inc {
				p.ranges[o.tag] = append(p.ranges[o.tag], rg)
			}
		}
		return opResult{r: rg}
	case opRelease:
		if r.maxID != o.b {
			return opResult{}
		}
		set(o.a)
		return opResult{ok: true}
	default: // opRaise
		if r.maxID >= o.a {
			return opResult{}
		}
		set(o.a)
		return opResult{ok: true}
	}
}

// quiesce waits until every goroutine a step started has finished or
// parked at the store: each load in flight and each client call has a
// pending store call, or is done.
func (w *world) quiesce() error {
	deadline := time.Now().Add(20 * time.Second)
	for spins := 0; ; spins++ {
		loads := 0
		for _, p := range w.procs {
			for _, st := range p.alloc.Stats() {
				if st.Loading {
					loads++
				}
			}
		}
		w.mu.Lock()
		parked := len(w.pending)
		w.mu.Unlock()
		busy := int(w.clients.Load()) + loads
		if busy == parked {
			w.mu.Lock()
			err := w.lateErr
			w.mu.Unlock()
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sim: seed %d, step %d: stuck: %d loads and %d client calls in flight, %d store calls parked", w.cfg.Seed, w.step, loads, w.clients.Load(), parked)
		}
		if spins < 50 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}
