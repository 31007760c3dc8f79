package sim_test

import (
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/sim"
	"github.com/idgen/idgen/store/fence"
)

// envInt reads a positive integer from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// dir is where a run keeps its database: a tmpfs if the machine has one,
// since every commit syncs the file.
func dir(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "idgen-sim")
		if err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// budget is the CI budget: IDGEN_SIM_SEEDS seeds (default 200, raceSeeds
// under the race detector, 5 with -short) of IDGEN_SIM_STEPS steps. A
// step costs about ten times as much under the detector, and what it
// checks (the goroutines of the allocators, the generators, the
// presences and database/sql under the simulator) is the same in every
// seed, while the oracle's reach grows with seeds: CI runs the whole
// budget in a build without it (.ci/run).
func budget(t *testing.T) (seeds, steps int) {
	def := 200
	if raceEnabled {
		def = raceSeeds
	}
	seeds, steps = envInt(t, "IDGEN_SIM_SEEDS", def), envInt(t, "IDGEN_SIM_STEPS", defaultSteps)
	if testing.Short() {
		seeds = 5
	}
	return seeds, steps
}

const (
	raceSeeds    = 3
	defaultSteps = 250
	// holeSteps are the steps of a known hole's world: its seeds are
	// those of runs this long.
	holeSteps = 300
)

func runSeed(t *testing.T, seed uint64, steps int, w sim.Weights, margin int64, cli ...fence.Config) (sim.Result, error) {
	cfg := sim.Config{Seed: seed, Steps: steps, Dir: dir(t), Weights: w, Margin: margin}
	if len(cli) > 0 {
		cfg.CLI = cli[0]
	}
	if os.Getenv("IDGEN_SIM_TRACE") != "" {
		cfg.Trace = func(step int, what string) { t.Logf("%5d %s", step, what) }
	}
	return sim.Run(t, cfg)
}

// seedRange is the seeds a test runs: 1 through seeds, or the one
// IDGEN_SIM_SEED names.
func seedRange(t *testing.T, seeds int) (first uint64, n int) {
	v := os.Getenv("IDGEN_SIM_SEED")
	if v == "" {
		return 1, seeds
	}
	first, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("IDGEN_SIM_SEED=%q: %v", v, err)
	}
	return first, 1
}

// TestSimulation runs the CI budget of seeds with the default op mix.
// IDGEN_SIM_SEED replays one seed, and with IDGEN_SIM_TRACE=1 prints
// every step. A failure prints the command that replays it.
func TestSimulation(t *testing.T) {
	t.Parallel()
	seeds, steps := budget(t)
	first, seeds := seedRange(t, seeds)
	var total sim.Result
	start := time.Now()
	for seed := first; seed < first+uint64(seeds); seed++ {
		res, err := runSeed(t, seed, steps, nil, 0)
		if err != nil {
			var v *sim.Violation
			if errors.As(err, &v) {
				t.Fatalf("%v\nreplay: IDGEN_SIM_SEED=%d IDGEN_SIM_STEPS=%d IDGEN_SIM_TRACE=1 go test ./internal/sim -run 'TestSimulation$' -v", err, seed, steps)
			}
			t.Fatalf("seed %d: %v", seed, err)
		}
		add(&total, res)
	}
	t.Logf("%d seeds from %d, %d steps in %v: %d segment IDs from %d reservations, %d snowflake IDs, %d crashes, %d shutdowns, %d pauses, "+
		"%d losses of %d commits, %d fences, 0 violations", seeds, first, total.Steps, time.Since(start).Round(time.Millisecond),
		total.SegmentIDs, total.Reservations, total.SnowflakeIDs, total.Crashes, total.Restarts, total.Pauses, total.Losses, total.LostCommits, total.Fences)
}

// The same seed gives the same run, step by step: the same trace hash.
// A different seed gives another, so the hash does cover the run.
func TestSimulation_Replays(t *testing.T) {
	t.Parallel()
	steps := 300
	if raceEnabled {
		steps = 100
	}
	run := func(seed uint64) sim.Result {
		res, err := runSeed(t, seed, steps, nil, 0)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		return res
	}
	a, b, c := run(42), run(42), run(43)
	if a != b {
		t.Fatalf("seed 42 twice: results %+v and %+v", a, b)
	}
	if a.TraceHash == c.TraceHash {
		t.Fatalf("seeds 42 and 43 gave the same trace hash %x", a.TraceHash)
	}
}

// witnessWeights make the witness world (TestSimulation_Witness): a
// fence margin of 1, so that live processes' lost ranges are covered by
// the witness raise and the hold alone, and no process that crashes or
// stalls, which the margin alone covers.
var witnessWeights = sim.Weights{"crash": 0, "pause": 0, "shutdown": 0, "failover": 0, "failover-keep-create": 2}

// TestSimulation_Witness runs the witness world: failovers under live
// processes with a fence margin of 1.
func TestSimulation_Witness(t *testing.T) {
	t.Parallel()
	seeds, steps := budget(t)
	first, seeds := seedRange(t, max(seeds/8, 1))
	for seed := first; seed < first+uint64(seeds); seed++ {
		if _, err := runSeed(t, seed, steps, sim.DefaultWeights().With(witnessWeights), 1); err != nil {
			t.Fatalf("%v\nreplay: IDGEN_SIM_SEED=%d IDGEN_SIM_STEPS=%d IDGEN_SIM_TRACE=1 go test ./internal/sim -run 'TestSimulation_Witness$' -v", err, seed, steps)
		}
	}
}

// holeWorld is the world of one of the review's findings, which the
// store once failed: its fix is planted back by name in a build with the
// idgenplant tag (store/internal/plant, TestSimulation_Planted).
type holeWorld struct {
	name, finding string
	w             sim.Weights
	margin        int64
	cli           fence.Config // one-shot commands' fence configuration, if set
}

// holeWorlds are the worlds of the findings the simulator found before
// their fixes, each within its first two seeds of holeSteps steps
// (F2 seed 1 step 183, F3 seed 1 step 115, F5 seed 2 step 286); planted
// back, each is found within 10 seeds (TestSimulation_Planted).
func holeWorlds() []holeWorld {
	d := sim.DefaultWeights()
	witness := d.With(witnessWeights)
	return []holeWorld{
		// id_sequence alone back, the rest as it was.
		{"restore-table", "F2", d.With(sim.Weights{"failover": 0, "restore-table": 4}), 0, fence.Config{}},
		// A failover that loses a tag's creation under a live process
		// that handed out IDs of it, with a margin too small to cover it:
		// the witness raise creates the row.
		{"lose-create", "F3", witness.With(sim.Weights{"failover-lose-create": 3, "cli-create": 2}), 1, fence.Config{}},
		// Graceful shutdowns during fences' holds: releases witness.
		{"shutdown-hold", "F5", witness.With(sim.Weights{"shutdown-in-hold": 30}), 1, fence.Config{}},
		// Consecutive ranges handed back at once, and no loss: a fence
		// is a violation.
		{"hand-backs", "F11", d.With(sim.Weights{"failover": 0, "range-hand-back": 20}), 0, fence.Config{}},
		// A whole restore checked at once by a process that saw what it
		// lost, which fences with the identity kept: the others must see
		// the fence on their next reservation.
		{"restore-checked", "F1", witness.With(sim.Weights{"failover-keep-create": 0, "restore-checked": 2}), 1, fence.Config{}},
		// Failovers that one-shot commands with the CLI's defaults (a
		// tenth of the TTL, a margin of 1) see first, under pauses.
		{"cli-failover", "F4", d.With(sim.Weights{"failover": 0, "failover-cli": 4, "pause": 8, "crash": 3}), 0,
			fence.Config{RangeCap: 640, LeaseTTL: 300 * time.Millisecond, Margin: 1}},
		// Lock clients beside the allocators: two chained failovers, the
		// second losing the first's fence and a grant, and another
		// process granted that token again (seed 6, step 271) before
		// grants were held after a fence. The witness raise of lock
		// tokens (L2) is shown by storetest.LockTokens' LiveHolderWitness.
		{"locks", "L1", d.With(sim.Weights{"lock": 6}), 0, fence.Config{}},
	}
}

// TestSimulation_Holes runs each finding's world, which must give no
// violation: a tenth of the budget's seeds each (20 in CI).
func TestSimulation_Holes(t *testing.T) {
	t.Parallel()
	seeds, _ := budget(t)
	for _, hw := range holeWorlds() {
		t.Run(hw.name, func(t *testing.T) {
			first, n := seedRange(t, max(seeds/10, 1))
			for seed := first; seed < first+uint64(n); seed++ {
				if _, err := runSeed(t, seed, holeSteps, hw.w, hw.margin, hw.cli); err != nil {
					t.Fatalf("%s: %v\nreplay: IDGEN_SIM_SEED=%d IDGEN_SIM_TRACE=1 go test ./internal/sim -run 'TestSimulation_Holes/%s$' -v", hw.finding, err, seed, hw.name)
				}
			}
		})
	}
}

// TestSimulation_KnownLimit hunts the loss docs/fencing.md names as one
// idgen cannot detect: a restore that keeps the identity (the same
// store_id, its ticks back) reached first by a process whose memory is
// behind what the restore lost. It must find a duplicate from its first
// known seed (5, step 194), or the limit is gone and the doc is wrong.
func TestSimulation_KnownLimit(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("hunts a documented limit, which checks the store, not goroutines")
	}
	w := sim.DefaultWeights().With(sim.Weights{"failover": 0, "restore": 4})
	for seed := uint64(5); seed < 8; seed++ {
		_, err := runSeed(t, seed, holeSteps, w, 0)
		var v *sim.Violation
		if errors.As(err, &v) {
			t.Logf("the documented limit, found: %v", v)
			return
		}
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	t.Error("no violation from seed 5 to 7: the identity-kept restore is caught now; update docs/fencing.md")
}

// A Config that cannot run is refused before anything starts.
func TestRun_RefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  sim.Config
	}{
		{"no dir", sim.Config{Steps: 1}},
		{"no steps", sim.Config{Dir: t.TempDir()}},
		{"negative margin", sim.Config{Dir: t.TempDir(), Steps: 1, Margin: -1}},
		{"unknown op", sim.Config{Dir: t.TempDir(), Steps: 1, Weights: sim.Weights{"jump": 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := sim.Run(t, tc.cfg); !errors.Is(err, sim.ErrConfig) {
				t.Fatalf("%+v: %v, want sim.ErrConfig", tc.cfg, err)
			}
		})
	}
}

// add adds r's counters to t.
func add(t *sim.Result, r sim.Result) {
	t.Steps, t.SegmentIDs, t.SnowflakeIDs, t.Reservations = t.Steps+r.Steps, t.SegmentIDs+r.SegmentIDs, t.SnowflakeIDs+r.SnowflakeIDs, t.Reservations+r.Reservations
	t.Crashes, t.Restarts, t.Pauses, t.Losses = t.Crashes+r.Crashes, t.Restarts+r.Restarts, t.Pauses+r.Pauses, t.Losses+r.Losses
	t.LostCommits, t.Fences = t.LostCommits+r.LostCommits, t.Fences+r.Fences
}
