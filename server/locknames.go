package server

import (
	"slices"
	"sync"
	"time"
)

// pruneEvery is the shortest time between two prunes of a full table.
const pruneEvery = 10 * time.Second

// lockNames is the bounded table of the lock names this instance has
// served, as tags are bounded: the names /admin/locks lists, since a
// lock.Backend cannot list its locks. It holds names, not grants: a
// name acquired only through another instance is not in it until a
// renewal comes here. Each name carries the generation of its last use,
// so that a prune, which describes names without holding mu, never
// drops a name used after its snapshot.
type lockNames struct {
	mu        sync.Mutex
	max       int
	gen       uint64
	seen      map[string]uint64
	lastPrune time.Time
}

// admit adds name, or returns errLockLimit when the table is full.
func (n *lockNames) admit(name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.gen++
	if _, ok := n.seen[name]; !ok && len(n.seen) >= n.max {
		return errLockLimit
	}
	n.seen[name] = n.gen
	return nil
}

// touch adds name whatever the cap.
func (n *lockNames) touch(name string) {
	n.mu.Lock()
	n.gen++
	n.seen[name] = n.gen
	n.mu.Unlock()
}

// snapshot returns the names, sorted, and the generation they were
// read at.
func (n *lockNames) snapshot() ([]string, uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	names := make([]string, 0, len(n.seen))
	for k := range n.seen {
		names = append(names, k)
	}
	slices.Sort(names)
	return names, n.gen
}

// forget drops names not used since generation gen, and returns how
// many it dropped.
func (n *lockNames) forget(names []string, gen uint64) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	dropped := 0
	for _, k := range names {
		if g, ok := n.seen[k]; ok && g <= gen {
			delete(n.seen, k)
			dropped++
		}
	}
	return dropped
}

// startPrune reports whether a prune may start at now.
func (n *lockNames) startPrune(now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.lastPrune.IsZero() && now.Sub(n.lastPrune) < pruneEvery {
		return false
	}
	n.lastPrune = now
	return true
}
