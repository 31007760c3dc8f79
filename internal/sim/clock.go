package sim

import (
	"testing/synctest"
	"time"
)

// Time is the synctest bubble's: it moves when every goroutine of the run
// is blocked, to the next timer, and so only as the simulator lets it.
// time.Now is the same for every process; each process's wall clock adds
// its own error (proc.offset), and its monotonic clock is the bubble's.

// advance moves the simulation's time by d: the simulator sleeps, and
// every timer due meanwhile fires (load and wait timeouts, Close's
// hand-back bound), in order. It then waits for what they started.
func (w *world) advance(d time.Duration) {
	if d > 0 {
		time.Sleep(d)
	}
	synctest.Wait()
}

// settle waits until every goroutine a step started (background loads,
// Close, ReserveRange) has finished or is blocked, at the store or on a
// timer, and returns a violation one of them found.
func (w *world) settle() error {
	synctest.Wait()
	w.db.mu.Lock()
	defer w.db.mu.Unlock()
	return w.db.lateErr
}

// settleQuietly is settle at the end of a run, when every process is
// gone: it fails what is still parked until nothing is.
func (w *world) settleQuietly() {
	for {
		synctest.Wait()
		w.db.mu.Lock()
		n := len(w.db.pending)
		w.db.mu.Unlock()
		if n == 0 {
			return
		}
		w.deliverAll(false, nil)
	}
}

// The process's clocks: a wall clock that may be off, and a monotonic one
// that is the simulation's time.
func (p *proc) wall() time.Time { return time.Now().Add(p.skew()) }

// skew is the wall clock's error; load goroutines read it.
func (p *proc) skew() time.Duration { return time.Duration(p.offset.Load()) }

type procClock struct{ p *proc }

func (c procClock) Now() (time.Time, time.Duration) {
	now := time.Now()
	return now.Add(c.p.skew()), now.Sub(c.p.w.start) + time.Hour
}

// Sleep sleeps in simulated time; the generator calls it on the
// simulator's goroutine, so the rest of the run goes on meanwhile.
func (c procClock) Sleep(d time.Duration) { time.Sleep(max(d, 0)) }
