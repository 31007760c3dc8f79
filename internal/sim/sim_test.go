package sim_test

import (
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/sim"
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

// budget is the CI budget: IDGEN_SIM_SEEDS seeds (default 200) of
// IDGEN_SIM_STEPS steps (default 3000) each. The long mode is the same
// with larger numbers, for example IDGEN_SIM_SEEDS=20000.
//
// Under the race detector the default is raceSeeds: a step costs about
// ten times as much there, and what the detector checks (the segment
// allocator's and the generators' goroutines under the simulator) is
// the same in every seed, while the oracle's reach grows with seeds. So
// the README's `go test -race` runs a few seeds for the detector, and CI
// runs the whole budget in a build without it (.ci/run). -short runs 5.
func budget(t *testing.T) (seeds, steps int) {
	def := 200
	if raceEnabled {
		def = raceSeeds
	}
	seeds, steps = envInt(t, "IDGEN_SIM_SEEDS", def), envInt(t, "IDGEN_SIM_STEPS", 3000)
	if testing.Short() {
		seeds = 5
	}
	return seeds, steps
}

// raceSeeds is the default number of seeds under the race detector.
const raceSeeds = 10

// TestSimulation runs the CI budget (see budget) of seeds with the
// default op mix. IDGEN_SIM_SEED replays one seed, and with
// IDGEN_SIM_TRACE=1 prints every step. A failure prints the command that
// replays it.
func TestSimulation(t *testing.T) {
	t.Parallel()
	seeds, steps := budget(t)
	first := uint64(1)
	if v := os.Getenv("IDGEN_SIM_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("IDGEN_SIM_SEED=%q: %v", v, err)
		}
		first, seeds = n, 1
	}
	var total sim.Result
	start := time.Now()
	for seed := first; seed < first+uint64(seeds); seed++ {
		cfg := sim.Config{Seed: seed, Steps: steps}
		if os.Getenv("IDGEN_SIM_TRACE") != "" {
			cfg.Trace = func(step int, what string) { t.Logf("%5d %s", step, what) }
		}
		res, err := sim.Run(t, cfg)
		if err != nil {
			var v *sim.Violation
			if errors.As(err, &v) {
				t.Fatalf("%v\nreplay: IDGEN_SIM_SEED=%d IDGEN_SIM_STEPS=%d go test ./internal/sim -run 'TestSimulation$' -v", err, seed, steps)
			}
			t.Fatal(err)
		}
		total.Add(res)
	}
	t.Logf("%d seeds from %d, %d steps in %v: %d segment IDs from %d reservations and %d hand-backs (%d of a second span), %d snowflake IDs, "+
		"%d crashes, %d graceful restarts, %d lease takeovers, %d failovers and %d restores losing %d commits, %d fences (%d of them adding lost fences' margins, %d forced by a regression), %d reservations held after fences, %d regressions caught, %d promotions reusing a timeline number, %d losses past %d commits, %d runs on MariaDB, 0 violations",
		seeds, first, total.Steps, time.Since(start).Round(time.Millisecond), total.SegmentIDs, total.Reservations, total.Releases, total.MultiSpan, total.SnowflakeIDs,
		total.Crashes, total.Restarts, total.Takeovers, total.Failovers, total.Restores, total.LostCommits, total.Fences, total.LostFences, total.RegressionFences, total.Held, total.Regressions, total.Reuses, total.LongLosses, 6, total.MariaDB)
}

// The same seed gives the same run, step by step: the same trace hash.
// A different seed gives another, so the hash does cover the run.
func TestSimulation_Replays(t *testing.T) {
	t.Parallel()
	run := func(seed uint64) sim.Result {
		res, err := sim.Run(t, sim.Config{Seed: seed, Steps: 800})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		return res
	}
	a, b, c := run(42), run(42), run(43)
	if a.TraceHash != b.TraceHash || a != b {
		t.Fatalf("seed 42 twice: trace hashes %x and %x, results %+v and %+v", a.TraceHash, b.TraceHash, a, b)
	}
	if a.TraceHash == c.TraceHash {
		t.Fatalf("seeds 42 and 43 gave the same trace hash %x", a.TraceHash)
	}
}
