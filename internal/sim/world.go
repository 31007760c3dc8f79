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
	// Server is the simulated database server; the zero value picks
	// PostgreSQL or MariaDB from the seed.
	Server Server
	// KeepMemory keeps each process's memory of the store across its
	// restarts, as SQLite's sidecar file does; PostgreSQL and MariaDB
	// processes lose it.
	KeepMemory bool
	// Margin, if set, is the fence's configured margin (fence.Config),
	// in place of the automatic one: a world where it is small leaves
	// live instances' lost ranges to the witness raise alone.
	Margin int64
	// SteadyLeases injects no fault into lease calls, and renews every
	// lease each third of its TTL, as serve does: every instance holds
	// its lease from its start, the witness raise's premise (an
	// instance whose every claim fails is neither counted nor waited for,
	// and only the margin covers it).
	SteadyLeases bool
	// Bare runs process 2 with no lease at all, as a program that embeds
	// segment over a store without store.Presence: the documented hole.
	// Otherwise it holds a snowflake worker lease or, on half the seeds,
	// a presence lease (serve --snowflake=false).
	Bare bool
}

// Server is a kind of simulated database server.
type Server int

// The simulated servers.
const (
	ServerBySeed Server = iota
	// ServerPostgres: a system identifier, a timeline every promotion
	// moves on (or, now and then, reuses: failover-reuse), a WAL
	// position.
	ServerPostgres
	// ServerMariaDB: a server_id, another after every failover, and a
	// GTID position; nothing numbers the failovers.
	ServerMariaDB
)

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
	// PlantNoWitness: a check against a new record raises nothing (the
	// witness raise is a no-op in the simulator's primitives).
	PlantNoWitness
	// PlantOwnCap: the margin from the fencer's own cap alone: the
	// store's largest row step and the caps leases recorded read as 0.
	PlantOwnCap
	// PlantNoPresence: the instance that runs without a snowflake worker
	// claims no presence lease.
	PlantNoPresence
	// PlantOneFailover: a fence after a promotion that reused the
	// timeline number moves the rows by what one counted failover
	// gives.
	PlantOneFailover
	// PlantCoversZero: a first recording writes Covers 0.
	PlantCoversZero
	// PlantNoRegression: a row below what the process reserved, and a
	// lease gone or older than it was told, are no evidence.
	PlantNoRegression
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
	// RegressionFences are fences forced by a regression: a row below
	// what the process reserved, a lease gone or older than it was told.
	RegressionFences int
	Reuses           int // failovers whose promotion reused a timeline number
	LongLosses       int // losses of more than maxLost commits
	MariaDB          int // runs on MariaDB

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
	t.RegressionFences += r.RegressionFences
	t.Reuses += r.Reuses
	t.LongLosses += r.LongLosses
	t.MariaDB += r.MariaDB
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
		server:    cfg.Server,
	}
	if w.server == ServerBySeed {
		w.server = ServerPostgres
		if w.chance(0.5) {
			w.server = ServerMariaDB
		}
	}
	if w.server == ServerMariaDB {
		w.res.MariaDB = 1
	}
	presence := w.chance(0.5)
	w.db = newDB(w)
	for i := range cfg.Procs {
		p := &proc{id: i, w: w, static: i == 0}
		switch {
		case i == 2 && cfg.Bare:
			p.lease = leaseNone
		case i == 2 && (presence || cfg.Plant == PlantNoPresence):
			p.lease = leasePresence
		}
		if p.fenceCfg, err = (fence.Config{RangeCap: p.maxStep(), LeaseTTL: leaseTTL, Margin: cfg.Margin}).Check(); err != nil {
			return Result{}, err
		}
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

	db     *db // the database; its mutex guards what it says
	server Server

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
		if w.cfg.SteadyLeases {
			w.renewDue()
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

// renewDue renews the lease of every process that has not renewed for a
// third of the TTL, as serve's renewal timers do: with SteadyLeases, a
// live instance's lease never lapses.
func (w *world) renewDue() {
	for _, p := range w.procs {
		if time.Since(p.beat) >= leaseTTL/3 {
			p.beat = time.Now()
			w.heartbeat(p)
		}
	}
}

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
	// Past every backoff and lease; with SteadyLeases, renewing on time.
	for range 10 {
		w.advance(time.Second)
		if w.cfg.SteadyLeases {
			w.renewDue()
		}
	}
	w.deliverAll(false, nil)
	for _, p := range w.procs {
		p.stocked = map[string]bool{}
		for _, st := range p.alloc.Stats() {
			c := st.Current
			p.stocked[st.Tag] = st.Next != nil || st.Loading || c.Pos < c.End
		}
	}
	for _, p := range w.procs {
		for try := 0; p.lease == leaseWorker; try++ {
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
			// A fence in the calm phase (a process that had not looked
			// since the last loss) holds reservations until the others
			// check in: a take may wait for that, once the prefetch it
			// started was held.
			held := w.res.Held
			for i := range 50 {
				before := p.obs.waited(tag)
				if err := w.calmTake(p, tag); err != nil {
					return err
				}
				if p.obs.waited(tag) > before && (i > 0 || p.stocked[tag]) && w.res.Held == held {
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
		// A reservation held after a fence waits for the others' renewals
		// (their check-in), every TTL/3, or for the hold's end, at most
		// a TTL and the margin away.
		w.advance(leaseTTL / 3)
		for _, q := range w.procs {
			w.heartbeat(q)
		}
		w.deliverAll(false, nil)
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
