//go:build idgenplant

package sim_test

import (
	"errors"
	"testing"

	"github.com/idgen/idgen/internal/sim"
)

// TestSimulation_Planted plants each fix back (IDGEN_PLANT, read by
// store/internal/plant in this build) and hunts its world: the
// simulator must find the hole again within plantSeeds seeds, or its
// world no longer shows what the fix is for. CI runs it in a build with
// the idgenplant tag, without the race detector (.ci/run).
func TestSimulation_Planted(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("hunts need the CI budget, without the race detector")
	}
	const plantSeeds = 20
	for _, hw := range holeWorlds() {
		t.Run(hw.finding, func(t *testing.T) {
			t.Setenv("IDGEN_PLANT", hw.finding)
			for seed := uint64(1); seed <= plantSeeds; seed++ {
				_, err := runSeed(t, seed, holeSteps, hw.w, hw.margin, hw.cli)
				var v *sim.Violation
				if errors.As(err, &v) {
					t.Logf("%s planted: found at seed %d: %v", hw.finding, seed, v)
					return
				}
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
			t.Errorf("%s planted: no violation in %d seeds of its world %q", hw.finding, plantSeeds, hw.name)
		})
	}
}
