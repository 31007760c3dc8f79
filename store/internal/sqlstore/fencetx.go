package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/idgen/idgen/store/fence"
)

// The fence: what the first process to see a changed identity does
// under the idgen_fence lock. Its steps are package fence's (fence.RunFence,
// over the SQL primitives of primitives.go); this file runs them in a
// transaction, retried, and keeps what the process learns.

// maxFences bounds the fences one operation goes through before it gives
// up: each is a real change of history, and more than this many during
// one call is a store that changes under every statement.
const maxFences = 3

// run runs attempt, one transaction that reads and checks the identity
// with the memory it is given, until it does not need a fence, fencing in
// between. On a nil Guard it runs attempt once with no reading expected.
func (g *Guard) run(ctx context.Context, attempt func(snap fence.Memory) (*reading, error)) error {
	if g == nil {
		_, err := attempt(fence.Memory{})
		return err
	}
	for fences := 0; ; fences++ {
		snap := g.snapshot()
		r, err := attempt(snap)
		var need *errFence
		if !errors.As(err, &need) {
			if err == nil && r != nil {
				g.committed(r)
			}
			return err
		}
		if fences == maxFences {
			return fmt.Errorf("store: the store's identity changed %d times during one call; last: %s", fences, need.d.Reason)
		}
		if err := g.fence(ctx, snap, need); err != nil {
			return err
		}
	}
}

// fence fences the store if it still needs it, under the idgen_fence
// row's lock, in one transaction, retried like a reservation after a
// deadlock or a serialization failure (two Galera nodes fencing at once:
// certification lets one through, and the other then finds the record
// and goes on).
func (g *Guard) fence(ctx context.Context, snap fence.Memory, need *errFence) error {
	g.fencing.Lock()
	defer g.fencing.Unlock()
	if now := g.snapshot(); now.Known != snap.Known || now.Generation != snap.Generation {
		return nil // another call of this process dealt with it meanwhile
	}
	var forced *fence.Decision
	if need.force {
		forced = &need.d
	}
	var ev *fence.Event
	var r *reading
	err := retry(ctx, g.d, g.hook, "fence", func() error {
		ev, r = nil, nil
		return g.db.InTx(ctx, func(q Querier) error {
			var fr *fence.Reading
			var err error
			f := forced
			if f != nil && need.still != nil {
				// Under the lock, so that no fence commits between the
				// look and the decision.
				if err := (primitives{g, q}).Lock(ctx); err != nil {
					return err
				}
				still, err := need.still(ctx, q)
				if err != nil {
					return err
				}
				if !still {
					f = nil
				}
			}
			// The fleet's parameters, whatever this process's flags, read
			// under the lock: on MySQL the first plain read of a
			// transaction fixes its snapshot, which must not be older than
			// the lock.
			if err := (primitives{g, q}).Lock(ctx); err != nil {
				return err
			}
			if _, err := g.readParams(ctx, q); err != nil {
				return err
			}
			if ev, fr, err = fence.RunFence(ctx, primitives{g, q}, g.config(), g.hw, snap, f, time.Now); err != nil {
				return err
			}
			r = &reading{cur: fr.Cur, rec: fr.Rec, witnessed: fr.Witnessed}
			if ev == nil || ev.Reason == "" {
				return nil
			}
			// Rows that went back while their marks did not are raised to
			// them: exactly what was reserved, whoever reserved it.
			for _, t := range ev.Tables {
				if _, err := q.Exec(ctx, g.id.ToMarks[t]); err != nil {
					return fmt.Errorf("raise %s to its marks (migration 00014): %w", t, err)
				}
			}
			// Lock tokens survive what IDs survive: every token moves up
			// by the margin with the counters, and the floor the record
			// now carries starts the lock names the store lost above it
			// (Locks).
			if _, err := q.Exec(ctx, g.id.LockBump, int64(math.MaxInt64)-ev.Plan.Margin, ev.Plan.Margin); err != nil {
				return fmt.Errorf("raise the lock tokens (migration 00016): %w", err)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("store: fence: %w", err)
	}
	g.hw.Witnessed(r.witnessed)
	g.mu.Lock()
	if ev != nil {
		g.mem = fence.Memory{}.Observe(r.cur, ev.To)
	} else {
		g.mem = g.mem.Observe(r.cur, r.rec)
	}
	m := g.mem
	g.mu.Unlock()
	if g.persist != nil {
		g.save(m)
	}
	if ev == nil || ev.Reason == "" {
		return nil
	}
	g.log.Warn("store fenced: its history changed; every tag's max_id moved up and worker leases held",
		"reason", ev.Reason, "recorded", ev.From.String(), "current", ev.To.String(),
		"margin", ev.Plan.Margin, "lost_margin", ev.Plan.Lost, "tag_floor", ev.To.Floor, "live_leases", ev.Plan.Live, "hold_until", time.UnixMilli(ev.Plan.HoldUntil).UTC(),
		"generation", ev.To.Generation, "tables", strings.Join(ev.Tables, ","))
	if f := g.obs.Load(); f != nil && *f != nil {
		(*f)(*ev)
	}
	return nil
}

// tables returns the sequence tables the store has.
func (g *Guard) tables(ctx context.Context, q Querier) ([]SequenceTable, error) {
	rows, err := q.Query(ctx, g.id.Tables)
	if err != nil {
		return nil, fmt.Errorf("list sequence tables: %w", err)
	}
	defer rows.Close()
	var out []SequenceTable
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		t, err := ParseSequenceTable(strings.ToLower(name))
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Record writes the first record of a new store, one with neither a
// record nor rows, under the idgen_fence lock (fence.First): what Migrate
// does once the schema exists. On any other store it does nothing.
func (g *Guard) Record(ctx context.Context) error {
	if g == nil {
		return nil
	}
	return retry(ctx, g.d, g.hook, "fence", func() error {
		return g.db.InTx(ctx, func(q Querier) error {
			_, err := fence.First(ctx, primitives{g, q}, time.Now())
			return err
		})
	})
}
