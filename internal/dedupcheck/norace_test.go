//go:build !race

package dedupcheck

const raceEnabled = false
