package snowflake

import (
	"runtime"
	"time"
)

// Clock is where a Generator gets time. It reports two readings, taken
// together, because they fail in opposite ways: the wall clock agrees with
// other machines but can be stepped, and a monotonic clock never steps but
// means nothing outside this process. A Generator counts time on the
// monotonic clock from an anchor on the wall clock, and compares the two on
// every reading to notice steps (see Generator).
//
// Tests implement Clock to simulate a stepped wall clock by moving wall but
// not mono, and to make waiting free by having Sleep advance both.
//
// A Generator calls Now and Sleep while holding its lock, so a Clock is
// never called concurrently by one Generator.
type Clock interface {
	// Now returns the wall-clock time and a monotonic reading. The
	// monotonic reading must never decrease; its origin is arbitrary. Any
	// monotonic reading carried inside wall is ignored.
	Now() (wall time.Time, mono time.Duration)

	// Sleep returns after the clock has advanced by at least d.
	Sleep(d time.Duration)
}

// systemClock is the default Clock. Its monotonic reading is Go's, which
// time.Now records in every Time and Sub uses when both operands have one.
type systemClock struct{ start time.Time }

func (c systemClock) Now() (time.Time, time.Duration) {
	t := time.Now()
	return t, t.Sub(c.start)
}

// spinFor is how much of a wait systemClock.Sleep spends yielding rather
// than in time.Sleep.
const spinFor = time.Millisecond

// Sleep is exact to a few microseconds. time.Sleep alone wakes up to a
// millisecond late on Linux (golang/go#44343), and most waits are for the
// next millisecond after a sequence overflow, so sleeping would cost up to
// half the IDs a worker can issue at full load. The last millisecond of a
// wait is spent yielding the processor instead; that burns CPU only while
// the generator is at its cap.
func (systemClock) Sleep(d time.Duration) {
	end := time.Now().Add(d)
	if d > spinFor {
		time.Sleep(d - spinFor)
	}
	for time.Now().Before(end) {
		runtime.Gosched()
	}
}
