//go:build !race

package sim_test

// raceEnabled is true in a build with the race detector.
const raceEnabled = false
