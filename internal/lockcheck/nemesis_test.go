package lockcheck

import (
	"fmt"
	"syscall"
	"time"
)

// nemesis injects the faults of a run into its fleet and counts them.
type nemesis struct {
	f      *fleet
	ttl    time.Duration
	counts Counts
	kills  int // workers started to replace killed ones, for their names
	// oneWriter says the lock store is one SQLite file: a worker stopped
	// inside one of its write transactions (a renewal, its presence's
	// check-in) holds the file's write lock, and no other worker can be
	// granted anything until it goes on. Such a pause is let go after
	// blockedAfter and tried again on the next holder.
	oneWriter bool
	blocked   int // pauses let go because the stopped worker held the file
}

// blockedAfter is how long a pause on a one-writer store waits for
// another grant before it takes the stopped worker for the file's
// writer.
const blockedAfter = 10 * time.Second

// pause stops a holder between two of its writes with SIGSTOP, until
// another worker was granted the lock and at least twice the TTL has
// passed, then lets it go on with SIGCONT: it resumes believing it holds
// the lock, and its next write carries a stale token.
func (n *nemesis) pause() error {
	for try := 0; ; try++ {
		p, token := n.f.holder()
		n.f.signal(p, syscall.SIGSTOP)
		stopped := time.Now()
		wait := 30 * time.Second
		if n.oneWriter && try < 3 {
			wait = blockedAfter
		}
		_, err := n.f.grantedAbove(p, token, wait)
		if err != nil && wait == blockedAfter {
			n.f.signal(p, syscall.SIGCONT)
			n.blocked++
			continue
		}
		if err != nil {
			n.f.signal(p, syscall.SIGCONT)
			return fmt.Errorf("pause of worker %s (token %d): %w", p.name, token, err)
		}
		stayStopped(stopped, 2*n.ttl)
		n.f.signal(p, syscall.SIGCONT)
		n.counts.Pauses++
		return nil
	}
}

// kill ends a holder between two of its writes with SIGKILL and starts
// a new worker in its place.
func (n *nemesis) kill() {
	p, _ := n.f.holder()
	n.f.kill(p)
	n.counts.Kills++
	n.kills++
	n.f.start(fmt.Sprintf("%s.%d", p.name[:2], n.kills))
}

// stayStopped returns d after a worker was stopped at stopped: a pause's
// own duration, at least twice the TTL, so that the worker's lease has
// lapsed by its own clock too when it wakes.
func stayStopped(stopped time.Time, d time.Duration) {
	time.Sleep(time.Until(stopped.Add(d))) // the fault: a pause lasts wall time, since leases lapse on the store's clock
}
