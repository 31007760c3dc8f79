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

// The fence transaction: what the first process to see a changed
// identity does under the idgen_fence lock (package fence decides, this
// file carries it out in SQL).

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
			var err error
			ev, r, err = g.fenceTx(ctx, q, snap, forced)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("store: fence: %w", err)
	}
	g.sawWitness(r.witnessed)
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

// fenceTx is the fence's transaction. It returns the event if it wrote
// the record (with an empty Reason for a first recording), and the
// reading it decided on. forced, if set, is evidence of a loss the
// identity does not show (errFence.force): it fences.
//
// Whether it fences or finds that another process did, it raises what
// this process reserved (witness) in the same transaction: the fencer's
// own reservations are not held back by its own lease.
func (g *Guard) fenceTx(ctx context.Context, q Querier, snap fence.Memory, forced *fence.Decision) (*fence.Event, *reading, error) {
	var gen int64
	if err := q.QueryRow(ctx, g.id.Lock).Scan(&gen); err != nil {
		return nil, nil, fmt.Errorf("lock idgen_fence (is migration 00005 applied?): %w", err)
	}
	r, err := g.readAll(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	r.fixup()
	// Whether or not this process fences, the record may end a hold it
	// must honour: another process's fence, found here by a process whose
	// reservations then read the server alone (the one-statement path).
	g.sawHold(r.rec.FenceUntil)
	d := fence.Decide(snap, r.cur, r.rec)
	if d.Verdict == fence.Proceed && forced != nil {
		// Also when another fence was recorded since snap: it cannot tell
		// whether that fence came before or after what went back (a
		// restore of id_sequence alone keeps the record). The evidence
		// ends with this fence: its witness raise puts this process's
		// rows back above what it reserved, and a lease's evidence holds
		// only against the generation it was told.
		d = *forced
	}
	if d.Verdict == fence.Initialize {
		// A store with rows but no record lost its record (the first
		// recording, with the commits after it) or predates fencing:
		// either way, ranges may have been handed out above its rows.
		used, err := g.used(ctx, q)
		if err != nil {
			return nil, nil, err
		}
		if used {
			d = fence.Decision{Verdict: fence.Fence, Reason: "the store has rows but no identity recorded: the record was lost, or the store predates fencing"}
		}
	}
	if d.Verdict == fence.Proceed {
		return nil, r, g.witness(ctx, q, r)
	}
	now := time.Now()
	if g.id.Tick != "" {
		if _, err := q.Exec(ctx, g.id.Tick); err != nil {
			return nil, nil, err
		}
		r.cur.Position = tickNext(r.cur.Position)
	}
	// A first recording keeps the floor (a store whose row was never
	// recorded may have one from `idgen tag bump --all`) and covers
	// generation 1: a process that saw a record this one replaces (lost,
	// and recorded again) finds it covering less than what it saw, and
	// fences (fence.Decide).
	to := fence.Record{Identity: r.cur, Generation: fence.NewGeneration(r.rec, snap, now), FenceUntil: r.rec.FenceUntil, Floor: r.rec.Floor, Covers: 1}
	to.Node = ""
	ev := &fence.Event{From: r.rec, To: to}
	if d.Verdict == fence.Initialize {
		if err := g.write(ctx, q, to, 0, 0); err != nil {
			return nil, nil, err
		}
		r.witnessed = to.Generation
		return ev, r, nil
	}
	var newest int64
	if err := q.QueryRow(ctx, g.id.NewestLease).Scan(&newest); err != nil {
		return nil, nil, fmt.Errorf("read the newest lease: %w", err)
	}
	live := fence.Live{Since: g.cfg.CountSince(now, r.rec, r.cur, newest)}
	if err := q.QueryRow(ctx, g.id.CountLive, live.Since).Scan(&live.Count, &live.RangeCap); err != nil {
		return nil, nil, fmt.Errorf("count live leases: %w", err)
	}
	tables, err := g.tables(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range tables {
		var step int64
		if err := q.QueryRow(ctx, g.id.MaxStep[t.Name]).Scan(&step); err != nil {
			return nil, nil, fmt.Errorf("read the largest step of %s: %w", t.Name, err)
		}
		live.RangeCap = max(live.RangeCap, step)
	}
	p := fence.NewPlan(g.cfg, now, r.rec, snap, r.cur, live)
	p.Generation = to.Generation
	for _, t := range tables {
		if _, err := q.Exec(ctx, g.id.Bump[t.Name], int64(math.MaxInt64)-p.Margin, p.Margin); err != nil {
			return nil, nil, fmt.Errorf("move %s up: %w", t.Name, err)
		}
		ev.Tables = append(ev.Tables, t.Name)
	}
	if err := g.witness(ctx, q, &reading{rec: to}); err != nil {
		return nil, nil, err
	}
	r.witnessed = to.Generation
	if _, err := q.Exec(ctx, g.id.Hold, p.HoldUntil, p.LiveSince, p.HoldUntil); err != nil {
		return nil, nil, fmt.Errorf("hold worker leases: %w", err)
	}
	if live.Since < p.LiveSince {
		if _, err := q.Exec(ctx, g.id.MarkCounted, live.Since, p.LiveSince); err != nil {
			return nil, nil, fmt.Errorf("mark the leases counted: %w", err)
		}
	}
	if _, err := q.Exec(ctx, g.id.Floor, p.HoldUntil, p.HoldUntil); err != nil {
		return nil, nil, fmt.Errorf("raise worker floors: %w", err)
	}
	to.FenceUntil = max(to.FenceUntil, p.HoldUntil)
	g.sawHold(to.FenceUntil)
	to.Floor, to.Covers = p.Floor, p.Covers
	if err := g.write(ctx, q, to, 1, p.Now); err != nil {
		return nil, nil, err
	}
	ev.To, ev.Reason, ev.Plan = to, d.Reason, p
	return ev, r, nil
}

// write writes the record to; fences (0 or 1) is added to the count of
// fences, and fencedAt is the fence's time (0 for a first recording).
func (g *Guard) write(ctx context.Context, q Querier, to fence.Record, fences, fencedAt int64) error {
	if _, err := q.Exec(ctx, g.id.Write, string(to.Kind), to.System, to.Timeline, to.Position, to.Generation, to.FenceUntil,
		to.Floor, to.Covers, fences, fencedAt); err != nil {
		return fmt.Errorf("record the identity: %w", err)
	}
	return nil
}

// used reports whether the store has rows in idgen's own tables:
// id_sequence (leaf_alloc's rows are Leaf's, there before idgen) or
// worker_node.
func (g *Guard) used(ctx context.Context, q Querier) (bool, error) {
	tables, err := g.tables(ctx, q)
	if err != nil {
		return false, err
	}
	stmts := []string{g.id.WorkerRows}
	for _, t := range tables {
		if t.Name == IDSequence.Name {
			stmts = append(stmts, g.id.Rows[t.Name])
		}
	}
	for _, st := range stmts {
		var n int64
		if err := q.QueryRow(ctx, st).Scan(&n); err != nil {
			return false, fmt.Errorf("count the store's rows: %w", err)
		}
		if n > 0 {
			return true, nil
		}
	}
	return false, nil
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
// record nor rows, under the idgen_fence lock: what Migrate does once the
// schema exists, so that every row a store ever has was written under a
// record, and a store found with rows but no record is fenced (fenceTx).
// On any other store it does nothing: the first checked transaction
// decides.
func (g *Guard) Record(ctx context.Context) error {
	if g == nil {
		return nil
	}
	return retry(ctx, g.d, g.hook, "fence", func() error {
		return g.db.InTx(ctx, func(q Querier) error {
			var gen int64
			if err := q.QueryRow(ctx, g.id.Lock).Scan(&gen); err != nil {
				return fmt.Errorf("lock idgen_fence: %w", err)
			}
			r, err := g.readAll(ctx, q)
			if err != nil {
				return err
			}
			r.fixup()
			if r.rec.Recorded() {
				return nil
			}
			if used, err := g.used(ctx, q); err != nil || used {
				return err
			}
			if g.id.Tick != "" {
				if _, err := q.Exec(ctx, g.id.Tick); err != nil {
					return err
				}
				r.cur.Position = tickNext(r.cur.Position)
			}
			to := fence.Record{Identity: r.cur, Generation: fence.NewGeneration(r.rec, fence.Memory{}, time.Now()), FenceUntil: r.rec.FenceUntil, Floor: r.rec.Floor, Covers: 1}
			to.Node = ""
			return g.write(ctx, q, to, 0, 0)
		})
	})
}
