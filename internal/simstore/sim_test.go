package sim_test

import (
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	sim "github.com/idgen/idgen/internal/simstore"
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
// under the race detector, 5 with -short) of IDGEN_SIM_STEPS steps.
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
	raceSeeds    = 10
	defaultSteps = 400
)

func runSeed(t *testing.T, seed uint64, steps int, w sim.Weights) (sim.Result, error) {
	cfg := sim.Config{Seed: seed, Steps: steps, Dir: dir(t), Weights: w}
	if os.Getenv("IDGEN_SIM_TRACE") != "" {
		cfg.Trace = func(step int, what string) { t.Logf("%5d %s", step, what) }
	}
	return sim.Run(t, cfg)
}

// TestSimulation runs the CI budget of seeds with the default op mix.
// IDGEN_SIM_SEED replays one seed, and with IDGEN_SIM_TRACE=1 prints
// every step. A failure prints the command that replays it.
func TestSimulation(t *testing.T) {
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
		res, err := runSeed(t, seed, steps, nil)
		if err != nil {
			var v *sim.Violation
			if errors.As(err, &v) {
				t.Fatalf("%v\nreplay: IDGEN_SIM_SEED=%d IDGEN_SIM_STEPS=%d IDGEN_SIM_TRACE=1 go test ./internal/sim -run 'TestSimulation$' -v", err, seed, steps)
			}
			t.Fatalf("seed %d: %v", seed, err)
		}
		total.Add(res)
	}
	t.Logf("%d seeds from %d, %d steps in %v: %d segment IDs from %d reservations, %d snowflake IDs, %d crashes, %d shutdowns, %d pauses, "+
		"%d losses of %d commits, %d fences, 0 violations", seeds, first, total.Steps, time.Since(start).Round(time.Millisecond),
		total.SegmentIDs, total.Reservations, total.SnowflakeIDs, total.Crashes, total.Restarts, total.Pauses, total.Losses, total.LostCommits, total.Fences)
}
