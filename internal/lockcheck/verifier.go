package lockcheck

import (
	"fmt"
	"maps"
	"slices"
)

// Row is one row of the resource's log: a write the guard accepted, in
// commit order (ID).
type Row struct {
	ID     int64
	Worker string
	Owner  string
	Hold   int
	Token  int64
}

// History is what a run left: every worker process's events, in the
// order each printed them (keyed by owner, one per process), and the
// log.
type History struct {
	Events map[string][]Event
	Log    []Row
}

// Counts are a run's figures. Faults are counted by the nemesis; the
// rest by Verify.
type Counts struct {
	Pauses, Kills, Failovers int // faults injected
	Grants                   int
	Writes                   int // accepted: rows of the log
	Stale                    int // writes the guard refused
	Losses                   int // leases that said they were lost, or whose Release failed
	Violations               int
}

func (c Counts) String() string {
	return fmt.Sprintf("pauses past TTL %d, kills %d, failovers %d; grants %d, writes accepted %d, stale writes refused %d, losses reported %d; violations %d",
		c.Pauses, c.Kills, c.Failovers, c.Grants, c.Writes, c.Stale, c.Losses, c.Violations)
}

// Verify checks h and returns its counts (without the faults) and the
// violations found, in words:
//
//   - a write accepted with a token lower than one accepted before it
//     (the log in commit order);
//   - two holders writing interleaved: a token's writes resumed after
//     another token's, or one token's writes by two owners;
//   - a grant whose token is not above the worker's previous grant, or
//     not above the highest token the log held before its Acquire was
//     called, or equal to another owner's grant;
//   - a lease lost silently: Release returned nil without the lease
//     saying it was lost, although a higher token had been accepted
//     before Release was called, or the guard refused one of its writes.
//
// No clock is compared across processes: only tokens, the log's commit
// order, and each process's own order of events.
func Verify(h History) (Counts, []string) {
	var c Counts
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }

	// The log, in commit order.
	log := slices.Clone(h.Log)
	slices.SortFunc(log, func(a, b Row) int { return int(a.ID - b.ID) })
	c.Writes = len(log)
	var top int64
	tokenOwner := map[int64]string{}
	ended := map[int64]bool{} // tokens whose run of writes another token's ended
	for i, r := range log {
		if r.Token < top {
			bad("stale write accepted: log row %d, token %d by %s, after token %d", r.ID, r.Token, r.Owner, top)
		}
		top = max(top, r.Token)
		if o, ok := tokenOwner[r.Token]; ok && o != r.Owner {
			bad("two holders of token %d wrote: %s and %s (log row %d)", r.Token, o, r.Owner, r.ID)
		}
		tokenOwner[r.Token] = r.Owner
		if i > 0 && log[i-1].Token != r.Token {
			ended[log[i-1].Token] = true
			if ended[r.Token] {
				bad("interleaved writes: log row %d, token %d by %s, resumes after token %d's row %d", r.ID, r.Token, r.Owner, log[i-1].Token, log[i-1].ID)
			}
		}
	}
	logged := map[int64]Row{}
	for _, r := range log {
		logged[r.ID] = r
	}

	// Each process's events.
	grantedTo := map[int64]string{}
	for _, owner := range slices.Sorted(maps.Keys(h.Events)) {
		var last int64
		unreleased := false // the last hold's grant may still stand
		type holdState struct {
			token     int64
			lost      bool
			refused   bool
			acquiring *Event
		}
		holds := map[int]*holdState{}
		get := func(n int) *holdState {
			if holds[n] == nil {
				holds[n] = &holdState{}
			}
			return holds[n]
		}
		for _, e := range h.Events[owner] {
			hs := get(e.Hold)
			switch e.Kind {
			case Acquiring:
				hs.acquiring = &e
			case Granted:
				c.Grants++
				hs.token = e.Token
				// An owner whose lease expired, or whose Release failed,
				// may still hold the grant in the store, and then gets it
				// back with its token: reentrancy.
				again := e.Token == last && unreleased
				if e.Token <= last && !again {
					bad("token went backwards: %s was granted %d after %d", owner, e.Token, last)
				}
				last = max(last, e.Token)
				if a := hs.acquiring; a != nil && (e.Token < a.Floor || e.Token == a.Floor && !again) {
					bad("token went backwards: %s was granted %d, not above token %d the log had accepted before it asked", owner, e.Token, a.Floor)
				}
				unreleased = false
				if o, ok := grantedTo[e.Token]; ok && o != owner {
					bad("token %d granted twice: to %s and to %s", e.Token, o, owner)
				}
				grantedTo[e.Token] = owner
			case Wrote:
				r, ok := logged[e.ID]
				if !ok || r.Token != e.Token || r.Owner != owner {
					bad("%s's write with token %d committed as log row %d, which the log has as %+v", owner, e.Token, e.ID, r)
				}
			case Stale:
				c.Stale++
				hs.refused = true
			case Lost:
				c.Losses++
				hs.lost = true
			case ReleaseError:
				if !hs.lost && e.Reason != "other" {
					c.Losses++
				}
				hs.lost = true
				// ErrExpired: the renewals failed until the TTL ran out by
				// this process's clock, and the store may still show the
				// grant; other errors leave it unknown. ErrLost and
				// ErrNotHeld say it is gone.
				unreleased = e.Reason == "other" || e.Reason == "expired"
			case Released:
				switch {
				case hs.lost:
					// Reported already.
				case e.Floor > e.Token:
					bad("lease lost silently: %s's hold %d (token %d) released without an error after the log accepted token %d", owner, e.Hold, e.Token, e.Floor)
				case hs.refused:
					bad("lease lost silently: %s's hold %d (token %d) released without an error after the guard refused its write", owner, e.Hold, e.Token)
				}
			}
		}
	}
	c.Violations = len(v)
	return c, v
}
