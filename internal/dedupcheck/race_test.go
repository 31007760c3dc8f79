//go:build race

package dedupcheck

// raceEnabled: the consumers are built with the race detector, which
// slows them several times over (see messages).
const raceEnabled = true
