package sim

import (
	"context"
	"math"

	"github.com/idgen/idgen/store/fence"
)

// simTx is fence.Tx on the simulated database: the primitives the
// product's protocol (package fence: Check, RunFence, First, Witness)
// runs on, in memory, as sqlstore's primitives run them in SQL. Calls run
// with db.mu held, inside the transaction of one simulated operation;
// a write marks the database dirty, and the operation commits it once
// (commitIfDirty). The plants that break a rule of the protocol are
// here, in the primitives, and in the world: never in product code.
type simTx struct {
	db *db
	p  *proc // whose transaction: its hold memory, as sqlstore's Guard
}

var _ fence.Tx = simTx{}

func (db *db) tx(p *proc) simTx { return simTx{db: db, p: p} }

// commitIfDirty commits what the primitives wrote (mu held).
func (db *db) commitIfDirty() {
	if db.dirty {
		db.commit()
	}
}

func (simTx) Lock(context.Context) error { return nil } // db.mu is held

// Read also remembers the record's hold, as sqlstore's does.
func (t simTx) Read(context.Context) (fence.Identity, fence.Record, error) {
	t.p.holdUntil = max(t.p.holdUntil, t.db.rec.FenceUntil)
	return t.db.identity(), t.db.rec, nil
}

// Tick: the simulated servers have positions of their own.
func (simTx) Tick(_ context.Context, cur fence.Identity) (fence.Identity, error) { return cur, nil }

func (t simTx) Used(context.Context) (bool, error) {
	return len(t.db.rows) > 0 || len(t.db.workers) > 0, nil
}

func (t simTx) NewestLease(context.Context) (int64, error) {
	var newest int64
	for _, wk := range t.db.workers {
		if wk.owner != "" {
			newest = max(newest, wk.expires)
		}
	}
	return newest, nil
}

// CountLive: PlantOwnCap ignores the caps the leases recorded.
func (t simTx) CountLive(_ context.Context, since int64) (count, rangeCap int64, err error) {
	for _, wk := range t.db.workers {
		if wk.owner != "" && wk.expires > since {
			count++
			rangeCap = max(rangeCap, wk.rangeCap)
		}
	}
	if t.db.w.cfg.Plant == PlantOwnCap {
		rangeCap = 0
	}
	return count, rangeCap, nil
}

func (simTx) Tables(context.Context) ([]string, error) { return []string{"id_sequence"}, nil }

// MaxStep: PlantOwnCap ignores the rows' steps.
func (t simTx) MaxStep(context.Context, string) (int64, error) {
	var step int64
	for _, r := range t.db.rows {
		step = max(step, r.step)
	}
	if t.db.w.cfg.Plant == PlantOwnCap {
		step = 0
	}
	return step, nil
}

// Bump: PlantZeroMargin moves nothing; PlantOneFailover, after a
// promotion that reused the timeline number the lost history had
// reached, moves the rows by half the margin, which is at most what one
// counted failover gives (fence.NewPlan: the margin is linear in the
// failovers, and fence.MinFailovers is 2, whatever the timelines say).
func (t simTx) Bump(_ context.Context, _ string, margin int64) error {
	switch {
	case t.db.w.cfg.Plant == PlantZeroMargin:
		margin = 0
	case t.db.w.cfg.Plant == PlantOneFailover && t.db.reused:
		margin /= 2
	}
	for _, r := range t.db.rows {
		if r.maxID > math.MaxInt64-margin {
			r.maxID = math.MaxInt64
		} else {
			r.maxID += margin
		}
	}
	t.db.dirty = true
	return nil
}

func (t simTx) Hold(_ context.Context, liveSince, until int64) error {
	for id, wk := range t.db.workers {
		if wk.owner != "" && wk.expires > liveSince {
			wk.expires = max(wk.expires, until)
			t.db.workers[id] = wk
		}
	}
	t.db.dirty = true
	return nil
}

func (t simTx) MarkCounted(_ context.Context, since, liveSince int64) error {
	for id, wk := range t.db.workers {
		if wk.owner != "" && wk.expires > since && wk.expires <= liveSince {
			wk.seen = fence.MustCheckIn
			t.db.workers[id] = wk
		}
	}
	t.db.dirty = true
	return nil
}

func (t simTx) Floor(_ context.Context, until int64) error {
	for id, wk := range t.db.workers {
		wk.last = max(wk.last, until)
		t.db.workers[id] = wk
	}
	t.db.dirty = true
	return nil
}

// Write: PlantZeroMargin keeps the floor; PlantCoversZero writes a first
// recording with Covers 0, as before the rule that it covers 1.
func (t simTx) Write(_ context.Context, to fence.Record, fenced bool, _ int64) error {
	switch {
	case t.db.w.cfg.Plant == PlantZeroMargin && fenced:
		to.Floor = t.db.rec.Floor
	case t.db.w.cfg.Plant == PlantCoversZero && !fenced:
		to.Covers = 0
	}
	t.p.holdUntil = max(t.p.holdUntil, to.FenceUntil)
	t.db.rec = to
	t.db.dirty = true
	return nil
}

// Raise: PlantNoWitness raises nothing.
func (t simTx) Raise(_ context.Context, tag string, to int64) error {
	if t.db.w.cfg.Plant == PlantNoWitness {
		return nil
	}
	if r, ok := t.db.rows[tag]; ok && r.maxID < to {
		r.maxID = to
		t.db.dirty = true
	}
	return nil
}
