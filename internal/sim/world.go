package sim

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/sqlite"
)

// Config is one simulation run.
type Config struct {
	Trace   func(step int, what string) // if set, told what each step does
	Seed    uint64
	Steps   int     // steps with faults, before the calm phase
	Dir     string  // the database file, its sidecar, the snapshots
	Weights Weights // the op mix; nil means DefaultWeights
	// Margin, if set, replaces the fence's automatic one: a small one
	// leaves live processes' lost ranges to the witness raise and the
	// hold, and covers no process that crashes or stalls through a hold.
	Margin int64
	CLI    fence.Config // if LeaseTTL is set, one-shot commands' (the CLI's defaults)
}

// Result is what a run did.
type Result struct {
	Steps, SegmentIDs, SnowflakeIDs int // SegmentIDs: distinct ones handed out
	Reservations                    int // the real store committed and answered
	Crashes, Restarts, Pauses       int // Restarts: graceful shutdowns
	Losses                          int // failovers and restores
	LostCommits, Fences             int64
	TraceHash                       uint64 // FNV-1a of every trace line: the same, the same run
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

// tags must make progress in every process once the faults stop. The
// steps also use edge, a few reservations below the int64 limit, and
// late, which exists once a one-shot command created it.
var tags = []string{"a", "b"}

const (
	edgeStart = math.MaxInt64 - 3*10 - 7
	procs     = 3 // processes running at once
)

// Run runs one simulation in a testing/synctest bubble of its own: a
// *Violation if a promise broke, another error if the simulation failed.
func Run(t *testing.T, cfg Config) (res Result, err error) {
	synctest.Test(t, func(*testing.T) { res, err = run(cfg) })
	return res, err
}

type world struct {
	cfg        Config
	ops        []weighted
	rng        *rand.Rand
	step, incs int
	faults     bool
	res        Result
	start      time.Time
	path       string
	hist       *history
	fences     atomic.Int64
	lost       atomic.Bool // a loss happened: a fence before it is a violation
	// seen reserved last: a restore that lost a reservation lost its.
	seen       atomic.Pointer[proc]
	lastFence  atomic.Int64    // Unix nanoseconds
	nowait     context.Context // cancelled: for takes that must not wait
	claimSnaps bool            // the op mix keeps lease claims: a snapshot before each

	mu      sync.Mutex // guards what follows, written by parked calls
	pending []*call
	lateErr error
	segIDs  map[tagID]int
	snow    map[int64]int
	stamps  [8]struct{ inc, ts int } // who stamped last under each worker ID, and when
	// topToken is the highest token of lock L seen granted.
	topToken, commits int64

	tmu  sync.Mutex // guards the trace hash
	hash hash.Hash64

	procs []*proc
}

// ErrConfig is returned for a Config that cannot run.
var ErrConfig = errors.New("sim: invalid config")

func run(cfg Config) (res Result, err error) {
	if cfg.Dir == "" || cfg.Steps < 1 || cfg.Margin < 0 {
		return Result{}, fmt.Errorf("%w: Dir %q, Steps %d, Margin %d: want a directory, a step and a margin not below 0", ErrConfig, cfg.Dir, cfg.Steps, cfg.Margin)
	}
	ops, err := cfg.Weights.table()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := &world{cfg: cfg, ops: ops, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		start: time.Now(), path: filepath.Join(cfg.Dir, "idgen.db"), nowait: ctx, hash: fnv.New64a(),
		segIDs: map[tagID]int{}, snow: map[int64]int{}}
	w.claimSnaps = slices.ContainsFunc(ops, func(o weighted) bool {
		return o.name == "failover-keep-create" || o.name == "failover-lose-create"
	})
	if err := w.setup(); err != nil {
		return Result{}, err
	}
	defer func() { err = errors.Join(err, w.finish()) }()
	for i := range procs {
		p := &proc{id: i, w: w, worker: i != 2 || w.chance(0.5)}
		w.procs = append(w.procs, p)
		if err := w.boot(p); err != nil {
			return w.res, err
		}
	}
	err = w.loop()
	w.res.SegmentIDs = len(w.segIDs)
	w.res.Fences = w.fences.Load()
	w.res.TraceHash = w.hash.Sum64()
	return w.res, err
}

// setup creates the schema and the edge tag, and the history's pool.
func (w *world) setup() error {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, w.path)
	if err != nil {
		return err
	}
	if _, err := s.Migrate(ctx, nil); err != nil {
		_ = s.Close()
		return err
	}
	err = s.CreateTag(ctx, segment.Tag{Name: "edge", MaxID: edgeStart, Step: 10})
	if err := errors.Join(err, s.Close()); err != nil {
		return err
	}
	w.hist, err = openHistory(ctx, w.cfg.Dir, w.path)
	if err != nil {
		return err
	}
	return w.snapshot(snapPlain)
}

// finish ends every process and closes the history's pool, so that no
// goroutine outlives the bubble.
func (w *world) finish() error {
	w.wake(true)
	for _, p := range w.procs {
		if p.gen != nil {
			_ = p.gen.Close()
		}
		w.teardown(p)
	}
	return w.hist.db.Close()
}

func (w *world) trace(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	w.tmu.Lock()
	defer w.tmu.Unlock()
	_, _ = fmt.Fprintf(w.hash, "%d %s\n", w.step, line) // a hash.Hash never fails
	if w.cfg.Trace != nil {
		w.cfg.Trace(w.step, line)
	}
}

func (w *world) violation(format string, args ...any) error {
	return &Violation{Seed: w.cfg.Seed, Step: w.step, Msg: fmt.Sprintf(format, args...)}
}

func (w *world) pick(n int) int         { return w.rng.IntN(n) }
func (w *world) chance(p float64) bool  { return w.rng.Float64() < p }
func (w *world) commit()                { w.mu.Lock(); w.commits++; w.mu.Unlock() }
func (w *world) commitCount() (n int64) { w.mu.Lock(); n = w.commits; w.mu.Unlock(); return n }
func (w *world) snapshot(kind snapKind) error {
	if kind == snapClaim && !w.claimSnaps {
		return nil // no loss of this world looks for them
	}
	return w.hist.snap(context.Background(), w.commitCount(), kind)
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
	}
	w.res.Steps = w.cfg.Steps
	return w.calm()
}

// advance moves the bubble's time by d: every timer due meanwhile fires
// (load and wait timeouts, presence renewals), in order, and the
// simulator waits for what they started. Pauses that are over end.
func (w *world) advance(d time.Duration) {
	if d > 0 {
		time.Sleep(d)
	}
	synctest.Wait()
	w.wake(false)
	synctest.Wait()
}

// settle waits until every goroutine a step started has finished or is
// blocked, and returns a violation one of them found.
func (w *world) settle() error {
	synctest.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lateErr
}

// calm stops every fault and checks that both protocols make progress:
// each process gets a snowflake ID if it holds a worker lease, and IDs.
func (w *world) calm() error {
	w.faults = false
	w.wake(true)
	for _, p := range w.procs {
		p.offset.Store(0)
	}
	for _, p := range w.procs {
		for try := 0; p.worker; try++ {
			if p.gen != nil && p.gen.Ready() == nil {
				break
			}
			if try == 20 {
				return w.violation("process %d: no snowflake worker 20 heartbeats after the faults stopped", p.id)
			}
			w.heartbeat(p)
			w.advance(leaseTTL / 3)
		}
		if err := w.snowNext(p); err != nil {
			return err
		}
		for _, tag := range tags {
			if err := w.calmTake(p, tag); err != nil {
				return err
			}
		}
	}
	return nil
}

// calmTake takes IDs, completing store calls, until one comes: a fence's
// hold may keep reservations back for a TTL and more.
func (w *world) calmTake(p *proc, tag string) error {
	for try := 0; try < 30; try++ {
		id, err := p.alloc.Next(w.nowait, tag)
		if err == nil {
			return w.handOut(p, tag, []int64{id})
		}
		if err := w.checkSegErr(p, tag, err); err != nil {
			return err
		}
		if err := w.deliverAll(nil); err != nil {
			return err
		}
		if err := w.settle(); err != nil {
			return err
		}
		w.advance(leaseTTL / 6)
		for _, q := range w.procs {
			w.heartbeat(q)
		}
	}
	return w.violation("process %d, tag %s: no ID after the faults stopped", p.id, tag)
}
