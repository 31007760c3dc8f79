package sim

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
)

// Config is one simulation run.
type Config struct {
	// Trace, if set, is told what each step does: for replaying a seed.
	Trace func(step int, what string)
	Seed  uint64
	Steps int // steps with faults, before the calm phase
	Procs int // simulated processes; default 3
	// Weights is the op mix (see DefaultWeights and the presets); nil
	// means DefaultWeights.
	Weights Weights
	// Plant plants a known bug, for the tests that show the oracle
	// catches it. The zero value plants none.
	Plant Plant
}

// Plant is a bug planted in the simulated store.
type Plant int

// The planted bugs.
const (
	PlantNone Plant = iota
	// PlantNoFence: the store never fences, as one whose server cannot
	// tell its identity (fence.ErrUnsupported).
	PlantNoFence
	// PlantZeroMargin: a fence moves max_id up by nothing.
	PlantZeroMargin
	// PlantOverlap: now and then a reservation silently hands out a range
	// overlapping the one before it.
	PlantOverlap
	// PlantNoHold: reservations go on during a fence's hold before the
	// instances that may have seen a lost fence have checked in.
	PlantNoHold
)

// Result is what a run did.
type Result struct {
	Steps        int
	SegmentIDs   int // distinct segment IDs handed out
	SnowflakeIDs int // distinct snowflake IDs handed out
	Reservations int // segment reservations committed
	Regressions  int // ranges below a high-water mark, skipped
	Releases     int // hand-backs committed
	MultiSpan    int // hand-backs of a tag's second span by one incarnation
	Crashes      int
	Restarts     int // graceful restarts
	Takeovers    int // snowflake leases claimed by a new owner
	Failovers    int // lossy failovers: a new history without the last commits
	Restores     int // the same history with its position back
	LostCommits  int // commits the failovers and restores lost
	Fences       int // fences the store performed (fence verdict Fence)
	LostFences   int // fences that added the margins of fences the record had lost
	Held         int // reservations held back after a fence (fence.Holding)

	// TraceHash is the FNV-1a hash of every trace line: two runs with the
	// same hash took the same steps with the same outcomes.
	TraceHash uint64
}

// Add adds r's counters to t (the trace hash is left alone).
func (t *Result) Add(r Result) {
	t.Steps += r.Steps
	t.SegmentIDs += r.SegmentIDs
	t.SnowflakeIDs += r.SnowflakeIDs
	t.Reservations += r.Reservations
	t.Regressions += r.Regressions
	t.Releases += r.Releases
	t.MultiSpan += r.MultiSpan
	t.Crashes += r.Crashes
	t.Restarts += r.Restarts
	t.Takeovers += r.Takeovers
	t.Failovers += r.Failovers
	t.Restores += r.Restores
	t.LostCommits += r.LostCommits
	t.Fences += r.Fences
	t.LostFences += r.LostFences
	t.Held += r.Held
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
// reservations below the int64 limit. The unknown-tag op asks for late,
// which exists once an operator created it (create-late), and ghost,
// which never does; tag-flood makes up tags past MaxTags.
var tags = []string{"a", "b", "edge"}

const edgeStart = math.MaxInt64 - 3*10 - 7

// Run runs one simulation in a testing/synctest bubble of its own, so t
// must not be in one already. It returns a *Violation if a promise
// broke, or another error if the simulation itself got stuck. A bubble
// whose goroutines are left blocked when the run ends fails t.
func Run(t *testing.T, cfg Config) (Result, error) {
	var res Result
	var err error
	synctest.Test(t, func(*testing.T) { res, err = run(cfg) })
	return res, err
}

func run(cfg Config) (Result, error) {
	if cfg.Procs == 0 {
		cfg.Procs = 3
	}
	ops, err := cfg.Weights.table()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := &world{
		cfg:       cfg,
		ops:       ops,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		start:     time.Now(),
		cancelled: ctx,
		hash:      fnv.New64a(),
		segIDs:    map[tagID]int{},
		snow:      map[int64]int{},
		fenceCfg:  fence.Config{RangeCap: rangeCap, LeaseTTL: leaseTTL},
	}
	if w.fenceCfg, err = w.fenceCfg.Check(); err != nil {
		return Result{}, err
	}
	w.db = newDB(w)
	for i := range cfg.Procs {
		p := &proc{id: i, w: w, static: i == 0}
		w.procs = append(w.procs, p)
		if err := w.boot(p); err != nil {
			return w.res, err
		}
	}
	err = w.loop()
	w.shutdown()
	for _, p := range w.procs {
		w.res.Regressions += int(p.obs.regressions.Load())
	}
	w.res.SegmentIDs, w.res.SnowflakeIDs = len(w.segIDs), len(w.snow)
	w.res.TraceHash = w.hash.Sum64()
	return w.res, err
}

type world struct {
	cfg       Config
	ops       []weighted
	rng       *rand.Rand
	step      int
	faults    bool
	res       Result
	start     time.Time
	cancelled context.Context // for calls that must not wait for a load
	hash      hash.Hash64

	db       *db          // the database; its mutex guards what it says
	fenceCfg fence.Config // the store's fencing configuration, checked

	procs  []*proc
	incs   int
	segIDs map[tagID]int // segment ID -> incarnation that handed it out
	snow   map[int64]int // snowflake ID -> incarnation
}

// tagID is a segment ID; each tag is a space of its own.
type tagID struct {
	tag string
	id  int64
}

func (w *world) trace(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	_, _ = fmt.Fprintf(w.hash, "%d %s\n", w.step, line) // a hash.Hash never fails
	if w.cfg.Trace != nil {
		w.cfg.Trace(w.step, line)
	}
}

func (w *world) violation(format string, args ...any) error {
	return &Violation{Seed: w.cfg.Seed, Step: w.step, Msg: fmt.Sprintf(format, args...)}
}

func (w *world) loop() error {
	w.faults = true
	for w.step = 1; w.step <= w.cfg.Steps; w.step++ {
		if err := w.once(); err != nil {
			return err
		}
		if err := w.settle(); err != nil {
			return err
		}
		if err := w.checkProcs(); err != nil {
			return err
		}
	}
	w.res.Steps = w.cfg.Steps
	return w.calm()
}

func (w *world) pick(n int) int { return w.rng.IntN(n) }

func (w *world) chance(p float64) bool { return w.rng.Float64() < p }

// calm stops every fault and checks that both protocols make progress:
// each process gets a snowflake ID and segment IDs of every tag but the
// exhausted one, and no take that had a buffer with IDs left waits.
func (w *world) calm() error {
	w.faults = false
	for _, p := range w.procs {
		p.offset.Store(0)
		p.paused = time.Time{}
	}
	w.deliverAll(false, nil)
	if err := w.settle(); err != nil {
		return err
	}
	w.advance(10 * time.Second) // past every backoff and lease
	w.deliverAll(false, nil)
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
		id, err := p.alloc.Next(w.cancelled, tag)
		if err == nil {
			// Loads complete at once now, as on a healthy store.
			w.deliverAll(false, nil)
			return w.handOut(p, tag, []int64{id})
		}
		if err := w.checkSegErr(p, tag, err); err != nil {
			return err
		}
		if errors.Is(err, segment.ErrTagLimit) {
			return nil // made-up tags filled the allocator before it held this one
		}
		w.trace("calm take %d.%d %s: %v", p.id, p.inc, tag, err)
		w.deliverAll(false, nil)
		if err := w.settle(); err != nil {
			return err
		}
		w.advance(100 * time.Millisecond)
	}
	return w.violation("process %d, tag %s: no ID after the faults stopped", p.id, tag)
}

// shutdown ends every process, failing what is still parked, until
// every goroutine of the run has returned.
func (w *world) shutdown() {
	w.faults = false
	for _, p := range w.procs {
		p.dead.Store(true)
	}
	w.deliverAll(false, nil)
	for _, p := range w.procs {
		a := p.alloc
		go func() { _ = a.Close() }()
		if p.gen != nil {
			_ = p.gen.Shutdown(context.Background())
		}
	}
	w.deliverAll(false, nil)
	w.settleQuietly()
}
