package sim

import (
	"maps"
	"time"
)

// Losing history: what a lossy failover or a restore takes from the
// simulated database, and the clock bound within which it may.

// What a failover or a restore may lose besides reservations and lease
// writes.
type keep int

const (
	keepFence  keep = 1 << iota // the last write of the fence record
	keepCreate                  // the last tag created
	// long: the loss may reach past maxLost commits, over reservations
	// and renewals of processes that are still live (losable).
	long
	// reuse: the promotion reuses a timeline number when the history it
	// loses had moved the timeline on (a promoted server that died before
	// any replica received its history file).
	reuse
	// keepClaim: no lease claim is lost.
	keepClaim
)

// lose loses the last commits: a lossy failover to an asynchronous
// replica that lacked them (a new timeline), or a restore of a copy
// taken before them (the same history, its position back). k says what
// must survive: a replica that had caught up with the last fence, as it
// has unless two failovers come within one replication lag, and with
// the last tag created.
func (db *db) lose(failover bool, k keep) {
	// The fence's hold assumes clocks within LeaseMargin of each other
	// (fence.Config): lose history only while the processes' clocks,
	// stepped by the skew faults, are within half of it of true time.
	for _, p := range db.w.procs {
		if d := p.skew(); d > maxSkew || d < -maxSkew {
			db.w.trace("  no loss of history: process %d's clock is %v off", p.id, d)
			return
		}
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	n := 0
	if most := db.losable(k); most > 0 {
		n = 1 + db.w.pick(most)
	}
	if n == 0 && !failover {
		return
	}
	s := db.history[len(db.history)-1-n]
	// A promotion reuses the number of the timeline it loses only from a
	// point strictly before that timeline's switch point: from the switch
	// point itself, it would carry the very identity (timeline and
	// position) of the fence's reading on the lost timeline, which a
	// process that saw nothing since cannot tell from it (a limit the
	// note states).
	reusable := n > 0 && db.history[len(db.history)-n].timeline == s.timeline
	db.history = db.history[:len(db.history)-n]
	db.rows = map[string]*row{}
	for k, r := range s.rows {
		db.rows[k] = &r
	}
	db.workers, db.rec, db.pos, db.creates = maps.Clone(s.workers), s.rec, s.pos, s.creates
	db.dirty, db.by, db.byInc = false, commitOther, 0
	what := "restore"
	db.reused = false
	if failover {
		next := db.timeline + 1
		if k&reuse != 0 && s.timeline < db.timeline && reusable {
			next = s.timeline + 1
			db.reused = true
			db.w.res.Reuses++
			what = "failover reusing a timeline number"
		} else {
			what = "failover"
		}
		db.timeline = next
		db.server++
		db.w.res.Failovers++
	} else {
		db.w.res.Restores++
	}
	db.w.res.LostCommits += n
	if n > maxLost {
		db.w.res.LongLosses++
	}
	db.unfenced = true
	db.w.trace("  %s: %d commits lost, now %s", what, n, db.identity())
}

// losable is how many of the last commits may be lost keeping k (mu
// held), as far back as the history goes. A commit made while a clock
// was off by more than maxSkew is kept too: a renewal made on a clock
// ahead told its holder an expiry the fence's hold, computed on a
// clock within LeaseMargin of true time, does not cover; the hold
// assumes clocks within LeaseMargin of each other whenever a lease is
// written, not only when the history is lost.
//
// Past maxLost commits (with long), neither a claim nor a reservation of
// an incarnation that is gone now is lost: the witness raise of a live
// one covers any number of its reservations, once its lease makes the
// others wait for it, and the fence's margin covers what the others lost
// within maxLost.
func (db *db) losable(k keep) int {
	live := map[int]bool{}
	for _, p := range db.w.procs {
		live[p.inc] = true
	}
	limit := maxLost
	if k&long != 0 {
		limit = maxLostLive
	}
	n := 0
	for i := len(db.history) - 1; i > 0 && n < limit; i-- {
		prev, cur := db.history[i-1], db.history[i]
		if (k&keepFence != 0 && prev.rec != cur.rec) || (k&keepCreate != 0 && prev.creates != cur.creates) || cur.skewed {
			break
		}
		if k&keepClaim != 0 && cur.kind == commitClaim {
			break
		}
		if n >= maxLost && (cur.kind == commitClaim || (cur.kind == commitReserve && !live[cur.inc])) {
			break
		}
		n++
	}
	return n
}

// maxSkew is the clock error within which the simulator loses history:
// half the fence's LeaseMargin (fence.Config), whose hold assumes clocks
// within it of each other.
const maxSkew = leaseTTL / 20

// skewed reports whether a process's clock is off by more than maxSkew
// (mu held).
func (db *db) skewed() bool {
	for _, p := range db.w.procs {
		if d := p.skew(); d > maxSkew || d < -maxSkew {
			return true
		}
	}
	return false
}

// steady reports whether clocks must not be stepped now: from a loss of
// history until well after the fence that deals with it. The fence's
// hold, computed on the fencer's clock, covers holders whose clocks are
// within LeaseMargin of it (fence.Config), and the skew faults step
// clocks by seconds.
func (db *db) steady() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.unfenced || time.Now().Before(db.steadyUntil)
}
