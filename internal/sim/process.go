package sim

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/fence"
)

// The simulated processes' settings, the fence's among them: the
// fence's RangeCap is the largest range one reservation of the process
// takes (its MaxStep; ReserveRange asks for at most 30), and its LeaseTTL
// the leases'. Process 1 runs with bigMaxStep, a cap above the others':
// the margin of a fence by another must cover it from what its claims
// recorded (fence.Live.RangeCap).
const (
	maxStep     = 640
	bigMaxStep  = 4 * maxStep
	leaseTTL    = 3 * time.Second
	negativeTTL = 2 * time.Second
	maxTags     = 6
	staticID    = 3 // the worker ID process 0 pins while it runs static
)

// proc is a simulated process; each restart is a new incarnation with a
// fresh allocator and generator, as after a crash.
type proc struct {
	id, inc int
	w       *world
	offset  atomic.Int64 // wall clock error, in nanoseconds
	paused  time.Time    // takes no step before this (a GC pause)
	alloc   *segment.Allocator
	dead    *atomic.Bool // this incarnation crashed: its store calls fail
	obs     *observer
	ranges  map[string][]segment.Range // reserved for this incarnation, under db.mu
	last    map[string]int64           // last segment ID per tag
	// neg is, per tag, until when this incarnation's negative cache
	// must answer ErrTagNotFound without a store call (under db.mu).
	neg   map[string]time.Time
	negHi map[string]time.Time // the latest the deadline may be (see missed)
	// inflight marks the operations (inflightKey) that had a store call
	// parked when a caller was told their tag is unknown (see missed),
	// under db.mu.
	inflight map[string]bool
	gen      *snowflake.Leased // nil until a claim succeeded
	owner    string
	// lease is how the process is known to the lease table: by a
	// snowflake worker lease, a presence lease (serve --snowflake=false:
	// presence), or not at all (a library user of segment alone).
	lease    leaseMode
	presence snowflake.Lease // the presence lease held, Owner "" if none
	// fenceCfg is the process's fence configuration (checked), its
	// RangeCap its own MaxStep.
	fenceCfg fence.Config
	// hw is this incarnation's high-water marks (the store's Guard's),
	// and told the generation each of its leases was last told, under
	// db.mu.
	hw     *fence.HighWater
	told   map[int64]int64
	beat   time.Time // the last renewal of SteadyLeases (renewDue)
	lastSF int64
	// static: process 0 starts with a static worker ID, pinned; the
	// unpin op turns it into a leased one and back.
	static bool
	// mem is what the process knows of the store's history (package
	// fence), under db.mu. A PostgreSQL or MariaDB process loses it when
	// it restarts (boot); Config.KeepMemory keeps it across
	// incarnations, as SQLite's sidecar file does.
	mem fence.Memory
	// holdUntil is the end of the newest fence hold p read in a record
	// (sqlstore's Guard remembers it the same way), under db.mu.
	holdUntil int64
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

// options are process p's allocator options. Process 2 runs with
// auto-create off, so it meets unknown tags and its negative cache;
// every process holds at most maxTags tags. The timeouts are real ones:
// they fire in simulated time.
func (p *proc) options() segment.Options {
	return segment.Options{
		AutoCreate: p.id != 2, DefaultStep: 10, MaxTags: maxTags, NegativeTTL: negativeTTL,
		WaitTimeout: 300 * time.Millisecond, LoadTimeout: time.Second, ReleaseTimeout: 500 * time.Millisecond,
		MinBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second,
		GrowBelow: 2 * time.Second, ShrinkAbove: 4 * time.Second, MaxStep: p.maxStep(),
		Observer: p.obs, Now: p.wall,
	}
}

// maxStep is the largest step p's allocator grows to, which is its
// fence's RangeCap.
func (p *proc) maxStep() int64 {
	if p.id == 1 {
		return bigMaxStep
	}
	return maxStep
}

type leaseMode int

const (
	leaseWorker   leaseMode = iota // a snowflake worker lease
	leasePresence                  // a presence lease (store.Presence)
	leaseNone                      // no lease: the documented hole
)

// boot starts a new incarnation of p.
func (w *world) boot(p *proc) error {
	w.incs++
	if p.obs != nil {
		w.res.Regressions += int(p.obs.regressions.Load())
	}
	p.dead = new(atomic.Bool)
	p.obs = &observer{waits: map[string]int{}}
	w.db.mu.Lock()
	p.inc = w.incs
	p.ranges = map[string][]segment.Range{}
	p.neg, p.negHi, p.inflight = map[string]time.Time{}, map[string]time.Time{}, map[string]bool{}
	p.hw, p.told = &fence.HighWater{}, map[int64]int64{}
	if !w.cfg.KeepMemory {
		p.mem, p.holdUntil = fence.Memory{}, 0
	}
	w.db.mu.Unlock()
	p.last = map[string]int64{}
	p.lastSF = 0
	a, err := segment.New(&store{p: p, inc: p.inc, dead: p.dead, hw: p.hw}, p.options())
	if err != nil {
		return err
	}
	p.alloc = a
	p.owner = fmt.Sprintf("p%d.%d", p.id, p.inc)
	p.gen, p.presence = nil, snowflake.Lease{}
	w.claim(p)
	return nil
}

// crash ends an incarnation with no goodbye: its store calls fail, its
// lease is left to expire, and a new incarnation starts.
func (w *world) crash(p *proc) error {
	w.res.Crashes++
	p.dead.Store(true)
	w.deliverAll(false, func(o *op) bool { return o.inc == p.inc }) // they fail
	old := p.alloc
	go func() { _ = old.Close() }() // frees goroutines; calls fail at once
	if err := w.settle(); err != nil {
		return err
	}
	return w.boot(p)
}

// restart is a graceful stop (the unused rest of every range handed
// back, several spans per tag when both buffers hold IDs, and the lease
// released) and a new incarnation, overlapping as in a rolling update.
func (w *world) restart(p *proc) error {
	w.res.Restarts++
	old, gen := p.alloc, p.gen
	// serve's --shutdown-timeout bounds the hand-back, in simulated time.
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), originKey{}, fmt.Sprintf("close#%d", w.step)), 2*time.Second)
	go func() { defer cancel(); _ = old.Shutdown(ctx) }()
	if gen != nil {
		_ = gen.Shutdown(context.Background())
	}
	if err := w.settle(); err != nil {
		return err
	}
	// The old incarnation's hand-backs may still be in flight.
	return w.boot(p)
}

// unpin turns process 0 from a static worker ID into a leased one, as an
// operator who drops --worker-id does: a graceful restart, then Unpin so
// that the ID returns to the pool once its lease has expired. Run again,
// it turns the process static again.
func (w *world) unpin(p *proc) error {
	if p.id != 0 {
		return nil
	}
	p.static = !p.static
	if err := w.restart(p); err != nil {
		return err
	}
	if !p.static {
		err := w.db.leases.Unpin(context.Background(), staticID)
		w.trace("unpin %d: %v", staticID, err)
	}
	return nil
}

// checkProcs checks what every process promises between steps: at most
// maxTags tags held.
func (w *world) checkProcs() error {
	for _, p := range w.procs {
		if n := len(p.alloc.Stats()); n > maxTags {
			return w.violation("process %d holds %d tags, past MaxTags %d", p.id, n, maxTags)
		}
	}
	return nil
}
