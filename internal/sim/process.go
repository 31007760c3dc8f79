package sim

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/sqlite"
)

// The processes' settings. Process 1 runs with a cap four times the
// others': the margin of a fence by another must cover it from what its
// claims recorded. Process 0 holds a static worker ID (ClaimStatic).
const (
	maxStep    = 640
	bigMaxStep = 4 * maxStep
	leaseTTL   = 3 * time.Second
	maxTags    = 6
	staticID   = 3
)

// proc is a simulated process (see the package doc). Each boot is a new
// incarnation with nothing in memory but what the store keeps in its
// sidecar file, as after a crash.
type proc struct {
	id, inc int
	w       *world
	f       *faults
	s       *store.Store
	alloc   *segment.Allocator
	dead    *atomic.Bool // this incarnation is gone: its parked calls fail
	gen     *snowflake.Leased
	pres    *store.Presence
	offset  atomic.Int64 // wall clock error, in nanoseconds
	paused  atomic.Bool
	until   time.Time                  // paused until
	worker  bool                       // holds a snowflake worker lease
	ranges  map[string][]segment.Range // reserved for this incarnation, under w.mu
	last    map[string]int64
	lastSF  int64
	grant   lock.Grant // of lock L, held by this incarnation
}

func (p *proc) maxStep() int64 {
	if p.id == 1 {
		return bigMaxStep
	}
	return maxStep
}

func (p *proc) wall() time.Time { return time.Now().Add(time.Duration(p.offset.Load())) }

// Now and Sleep make p its generator's clock: p's wall clock, and the
// bubble's monotonic one.
func (p *proc) Now() (time.Time, time.Duration) { return p.wall(), time.Since(p.w.start) + time.Hour }

func (p *proc) Sleep(d time.Duration) { time.Sleep(max(d, 0)) }

// open opens a real store on the world's file through a faulty
// connector, with the fence configured as serve does.
func (w *world) open(ctx context.Context, f *faults, rangeCap int64, cli bool) (*store.Store, error) {
	s, err := sqlite.OpenWrapped(ctx, w.path, func(c driver.Connector) driver.Connector { return connector{base: c, f: f} })
	if err != nil {
		return nil, err
	}
	c := fence.Config{RangeCap: rangeCap, LeaseTTL: leaseTTL, Margin: w.cfg.Margin}
	if cli && w.cfg.CLI.LeaseTTL > 0 {
		c = w.cfg.CLI
	}
	if err = s.ConfigureFence(c, nil); err == nil && !cli {
		err = s.RecordFence(ctx)
	}
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	s.ObserveFences(func(e fence.Event) {
		if w.fences.Add(1); !w.lost.Load() {
			w.late(w.violation("a fence of a store that lost nothing: %s", e.Reason))
		}
		w.lastFence.Store(time.Now().UnixNano())
	})
	return s, nil
}

// boot starts a new incarnation of p.
func (w *world) boot(p *proc) error {
	if err := w.snapshot(snapClaim); err != nil {
		return err
	}
	w.incs++
	p.inc = w.incs
	p.dead = new(atomic.Bool)
	p.f = &faults{commits: w.commit}
	p.paused.Store(false)
	w.mu.Lock()
	p.ranges = map[string][]segment.Range{}
	w.mu.Unlock()
	p.last, p.lastSF, p.grant = map[string]int64{}, 0, lock.Grant{}
	ctx := context.Background()
	s, err := w.open(ctx, p.f, p.maxStep(), false)
	if err != nil {
		return err
	}
	p.s = s
	p.alloc, err = segment.New(&gated{p: p, inc: p.inc, dead: p.dead, s: s}, segment.Options{
		AutoCreate: p.id != 2, DefaultStep: 10, MaxTags: maxTags, NegativeTTL: 2 * time.Second,
		WaitTimeout: 300 * time.Millisecond, LoadTimeout: time.Second, ReleaseTimeout: 500 * time.Millisecond,
		MinBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second,
		GrowBelow: 2 * time.Second, ShrinkAbove: 4 * time.Second, MaxStep: p.maxStep(), Now: p.wall,
	})
	if err != nil {
		return err
	}
	// Every process holds a presence lease, as serve does, with a TTL a
	// few milliseconds apart from the others' so that no two renewals
	// run at one instant; the fence's LeaseTTL stays the longest.
	owner := fmt.Sprintf("p%d.%d", p.id, p.inc)
	p.pres, err = s.Presence(ctx, store.PresenceConfig{Owner: owner, TTL: leaseTTL - time.Duration(7*p.id+1)*time.Millisecond})
	w.trace("  presence %d.%d: %v", p.id, p.inc, err)
	p.gen = nil
	w.claim(p)
	return nil
}

// leasedConfig is p's generator: a static worker ID for process 0.
func (w *world) leasedConfig(p *proc) snowflake.LeasedConfig {
	cfg := snowflake.LeasedConfig{
		Owner: fmt.Sprintf("p%d.%d", p.id, p.inc), TTL: leaseTTL, RenewInterval: -1, Margin: leaseTTL / 10,
		Generator: snowflake.Config{Epoch: w.start.Add(-24 * time.Hour).Truncate(time.Millisecond), TimeBits: 41,
			WorkerBits: 3, SequenceBits: 19, Clock: p},
	}
	if p.id == 0 {
		cfg.Static, cfg.Generator.WorkerID = true, staticID
	}
	return cfg
}

// claim claims p's snowflake worker lease.
func (w *world) claim(p *proc) {
	if !p.worker {
		return
	}
	if err := w.snapshot(snapClaim); err != nil {
		w.late(err)
		return
	}
	var g *snowflake.Leased
	var err error
	w.faulty(p.f, w.faults, func() { g, err = snowflake.NewLeased(context.Background(), p.s.Leases(), w.leasedConfig(p)) })
	w.trace("  claim %d.%d: %v", p.id, p.inc, err)
	if err == nil {
		p.gen = g
	}
}

// heartbeat renews p's worker lease, or claims one.
func (w *world) heartbeat(p *proc) {
	if p.gen == nil {
		w.claim(p)
		return
	}
	var err error
	w.faulty(p.f, w.faults, func() { err = p.gen.Heartbeat(context.Background()) })
	w.trace("  heartbeat %d.%d: worker %d, %v", p.id, p.inc, p.gen.WorkerID(), err)
}

// crash ends an incarnation with no goodbye: every statement of its
// pool fails from now, so its leases stay in the table until they
// expire, and its memory is gone.
func (w *world) crash(p *proc) error {
	w.res.Crashes++
	p.dead.Store(true)
	p.f.crash()
	if err := w.deliverAll(func(c *call) bool { return c.g.inc == p.inc }); err != nil {
		return err
	}
	w.teardown(p)
	return w.boot(p)
}

// teardown frees what is left of a dead incarnation.
func (w *world) teardown(p *proc) {
	p.dead.Store(true)
	p.f.crash()
	a := p.alloc
	go func() { _ = a.Close() }()
	_ = w.deliverAll(func(c *call) bool { return c.g.inc == p.inc })
	if p.pres != nil {
		_ = p.pres.Close(context.Background())
	}
	_ = p.s.Close()
	synctest.Wait()
}

// shutdown is a graceful stop, perhaps during a fence's hold: the
// allocator hands back what it did not use, the worker lease and the
// presence are released, the store closed; then a new incarnation.
func (w *world) shutdown(p *proc) error {
	w.res.Restarts++
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), originKey{}, fmt.Sprintf("close#%d", w.step)), 2*time.Second)
	defer cancel()
	var done atomic.Bool
	a := p.alloc
	go func() { _ = a.Shutdown(ctx); done.Store(true) }()
	for i := 0; ; i++ {
		if err := w.deliverAll(func(c *call) bool { return c.g.inc == p.inc }); err != nil {
			return err
		}
		if done.Load() {
			break
		}
		if i == 100 {
			return fmt.Errorf("sim: process %d's shutdown did not end", p.id)
		}
		w.advance(50 * time.Millisecond)
	}
	if p.gen != nil {
		err := p.gen.Shutdown(context.Background())
		w.trace("  release %d.%d: %v", p.id, p.inc, err)
	}
	if p.pres != nil {
		err := p.pres.Close(context.Background())
		w.trace("  presence release %d.%d: %v", p.id, p.inc, err)
		p.pres = nil
	}
	w.teardown(p)
	return w.boot(p)
}

// pause stops p (a long GC pause, a stopped VM) for d: it takes no
// step, its transactions wait, its leases lapse if d passes the TTL.
func (w *world) pause(p *proc, d time.Duration) {
	w.res.Pauses++
	p.paused.Store(true)
	p.f.pause(true)
	p.until = time.Now().Add(d)
}

// wake ends the pauses that are over.
func (w *world) wake(all bool) {
	for _, p := range w.procs {
		if p.paused.Load() && (all || !time.Now().Before(p.until)) {
			p.paused.Store(false)
			p.f.pause(false)
			w.trace("  woke %d.%d", p.id, p.inc)
		}
	}
}

// cli runs one command as `idgen tag …` does: a store of its own, one
// call, Close. Its faults are the world's.
func (w *world) cli(what string, do func(ctx context.Context, s *store.Store) error) {
	ctx := context.Background()
	f := &faults{commits: w.commit}
	s, err := w.open(ctx, f, maxStep, true)
	if err == nil {
		w.faulty(f, w.faults, func() { err = do(ctx, s) })
		_ = s.Close()
	}
	w.trace("  cli %s: %v", what, err)
}

// staticOneShot is a second instance started with process 0's static
// --worker-id, as in a rolling update: its claim must fail while a live
// owner holds the ID; else it takes a few snowflake IDs and releases it.
func (w *world) staticOneShot() error {
	if err := w.snapshot(snapClaim); err != nil {
		return err
	}
	w.incs++
	p := &proc{id: 0, inc: w.incs, w: w, worker: true}
	ctx := context.Background()
	s, err := w.open(ctx, &faults{commits: w.commit}, maxStep, false)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	g, err := snowflake.NewLeased(ctx, s.Leases(), w.leasedConfig(p))
	w.trace("  static one-shot %d: %v", p.inc, err)
	if err != nil {
		return nil
	}
	p.gen = g
	for range 3 {
		if err := w.snowNext(p); err != nil {
			return err
		}
	}
	return g.Shutdown(ctx)
}
