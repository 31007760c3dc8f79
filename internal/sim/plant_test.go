package sim_test

import (
	"errors"
	"testing"

	"github.com/idgen/idgen/internal/sim"
)

// huntBudget is the budget a hunt for a violation that must be found
// gets: the whole CI budget, never raceSeeds. It skips under -short,
// and under the race detector, which would make the hunt ten times
// slower and checks nothing a plant shows; CI hunts without it.
func huntBudget(t *testing.T) (seeds, steps int) {
	t.Helper()
	if testing.Short() {
		t.Skip("hunting a planted bug needs the CI budget of seeds: skipped under -short")
	}
	if raceEnabled {
		t.Skip("hunting a planted bug checks the oracle, not goroutines: skipped under -race; CI hunts in a build without it (.ci/run)")
	}
	return envInt(t, "IDGEN_SIM_SEEDS", 200), envInt(t, "IDGEN_SIM_STEPS", 3000)
}

// hunt runs cfg over seeds 1 to seeds until the oracle reports a
// violation, and returns it, or nil if every seed passed. An error that
// is not a violation (a stuck run) fails t.
func hunt(t *testing.T, cfg sim.Config, seeds, steps int) *sim.Violation {
	t.Helper()
	cfg.Steps = steps
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		cfg.Seed = seed
		_, err := sim.Run(t, cfg)
		var v *sim.Violation
		if errors.As(err, &v) {
			return v
		}
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	return nil
}

// longLosses is DefaultWeights whose only losses of history are
// failovers that may lose up to 96 commits of live instances'
// reservations, and no instance is ever gone (no crash, no restart, no
// pause past its lease, no clock off; with SteadyLeases, no lease call
// fails and every lease is renewed on time): with a
// fence margin of 1 (witnessMargin), the witness raise alone keeps their
// ranges from being reserved again.
func longLosses() sim.Weights {
	return sim.DefaultWeights().With(sim.Weights{"failover": 0, "failover-lose-fence": 0, "failover-lose-create": 0, "failover-reuse": 0, "failover-long": 3,
		"crash": 0, "restart": 0, "unpin": 0, "pause": 0, "skew": 0, "step-back": 0})
}

// witnessMargin is the fence margin of the world of longLosses.
const witnessMargin = 1

// Each planted bug must be found within the CI budget: the oracle is
// only as good as the bugs it is shown to catch.
func TestSimulation_PlantedBugs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		plant   sim.Plant
		weights sim.Weights
	}{
		// Fencing disabled: a lossy failover hands out the lost ranges
		// again, and lost worker claims collide.
		{"fencing disabled", sim.PlantNoFence, nil},
		// A fence that moves max_id up by nothing.
		{"margin 0", sim.PlantZeroMargin, nil},
		// A store that silently overlaps ranges, with no failover to
		// blame it on.
		{"store overlaps ranges", sim.PlantOverlap, sim.CalmWeights()},
		// Reservations not held after a fence: an instance that had not
		// seen a fence the store lost reserves onto ranges reserved
		// after it before one that saw it fences again.
		{"no reservation hold", sim.PlantNoHold, sim.DefaultWeights().With(sim.Weights{"failover-lose-fence-unseen": 5})},
		// No witness raise: a loss longer than the margin covers, of
		// reservations by live instances, is reserved again.
		{"no witness raise", sim.PlantNoWitness, longLosses()},
		// Not here: PlantOwnCap (a margin from the fencer's own cap). The
		// automatic margin counts two ranges per live lease and one more,
		// twice (fence.MinFailovers): a range above the fencer's cap that
		// an instance gone since lost is covered by it up to about eight
		// caps, and live instances' by their witness raise. With row steps
		// up to forty caps, 200 seeds found none.
		// The instance without a worker lease holds no presence lease:
		// neither counted nor waited for.
		{"no presence lease", sim.PlantNoPresence, longLosses()},
		// One failover counted after a promotion that reused a timeline
		// number.
		{"one failover on timeline reuse", sim.PlantOneFailover, sim.DefaultWeights().With(sim.Weights{"failover-reuse": 5})},
		// Not here: PlantCoversZero. Covers on a first recording is read
		// only after a loss takes the store back to before its first
		// record with no row left (fence.RunFence fences a store with
		// rows and no record); the simulated store records its identity
		// before its first row (fence.First, as Migrate), and no loss
		// reaches back past that.
		// Regressions are no evidence: a restore the identity does not
		// show, first reached by a process behind it.
		{"no regression fence", sim.PlantNoRegression, sim.DefaultWeights().With(sim.Weights{"restore": 5})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := sim.Config{Plant: tc.plant, Weights: tc.weights}
			if tc.plant == sim.PlantNoWitness || tc.plant == sim.PlantNoPresence {
				cfg.Margin, cfg.SteadyLeases = witnessMargin, true
			}
			seeds, steps := huntBudget(t)
			v := hunt(t, cfg, seeds, steps)
			if v == nil {
				t.Fatalf("planted %q: no violation in the CI budget", tc.name)
			}
			t.Logf("found at seed %d, step %d: %s", v.Seed, v.Step, v.Msg)
		})
	}
}

// The world of the witness plants (longLosses, a margin of 1) with the
// real protocol: no ID is handed out twice, so the witness raise and the
// presence lease alone cover live instances' lost ranges, whatever their
// number.
func TestSimulation_WitnessCoversLongLosses(t *testing.T) {
	t.Parallel()
	seeds, steps := budget(t)
	if v := hunt(t, sim.Config{Weights: longLosses(), Margin: witnessMargin, SteadyLeases: true}, seeds, steps); v != nil {
		t.Fatalf("%s\nreplay: seed %d", v.Msg, v.Seed)
	}
}

// A failover that loses the last fence, reached first by an instance
// that had not seen it, five times as often as the other failovers: on
// PostgreSQL the timelines count the failovers (fence.Failovers), and
// reservations wait until the instances that saw the lost fence have
// renewed and fenced again (fence.Holding), so no ID is handed out
// twice. Without the hold (PlantNoHold, above), the hunt finds a
// duplicate at once; before either, 39 of seeds 1-100 did. Seeds 1-3000
// give none. Seed 1757 found the limit docs/fencing.md states, until
// every process with a worker lease held a presence lease beside it, as
// serve does: the one instance that saw the lost fence held no lease
// (every claim it made failed), so the hold waited for nobody.
func TestSimulation_LostFenceUnseen(t *testing.T) {
	t.Parallel()
	seeds, steps := budget(t)
	if v := hunt(t, sim.Config{Weights: sim.DefaultWeights().With(sim.Weights{"failover-lose-fence-unseen": 5})}, seeds, steps); v != nil {
		t.Fatalf("%s\nreplay: seed %d", v.Msg, v.Seed)
	}
}

// Known holes: losses of history that the fence, as package fence
// decides it today, does not cover. Each test shows the simulator finds
// its hole within the CI budget; when one fails, the hole is closed:
// move its ops into DefaultWeights and delete its case.
func TestSimulation_KnownHoles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		w    sim.Weights
	}{
		// A restore under running instances whose first checked
		// transaction comes from an instance that had not seen the lost
		// commits: the position is not behind what it saw, it proceeds
		// and reserves the lost ranges again; once its commits carry the
		// position past what the others saw, they proceed too.
		{"restore seen first by a process behind it", sim.Weights{"restore": 5}},
		// TestSimulation_LostFenceUnseen with renewals ten times rarer:
		// the instance that saw the lost fence renews no lease through
		// the whole hold (its renewals fail, or it makes none), so the
		// hold ends without it, and it goes on handing out ranges that a
		// reservation after the hold hands out again.
		{"lost fence seen only by an instance that does not renew through the hold", sim.Weights{"failover-lose-fence-unseen": 5, "heartbeat": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seeds, steps := huntBudget(t)
			v := hunt(t, sim.Config{Weights: sim.DefaultWeights().With(tc.w)}, seeds, steps)
			if v == nil {
				t.Fatalf("%v gave no violation in the CI budget: the hole is closed; move the ops into DefaultWeights", tc.w)
			}
			t.Logf("found at seed %d, step %d: %s", v.Seed, v.Step, v.Msg)
		})
	}
}
