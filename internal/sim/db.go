package sim

import (
	"context"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
)

// db is the simulated database: the id_sequence rows, the worker lease
// table and the idgen_fence record, with the server's identity and the
// last commits, which a failover or a restore loses.
type db struct {
	w  *world
	mu sync.Mutex // guards all below, and what procs keep under it

	rows    map[string]*row
	workers map[int64]worker
	rec     fence.Record
	pos     uint64 // commits so far: the server's position
	// timeline moves on with every failover, as a promotion moves a
	// PostgreSQL timeline on, unless the promotion reuses a number
	// (reused, until the next loss); server is the MariaDB server_id,
	// another with every failover.
	timeline int
	reused   bool
	server   int
	// dirty: the primitives (tx.go) wrote in the current transaction.
	dirty bool
	// by is the kind of the transaction being committed (see losable).
	by      commitKind
	byInc   int
	creates int        // tags created so far
	history []snapshot // the state after each of the last commits

	// unfenced is set from a loss of history until the fence after it,
	// and steadyUntil is the end of that fence's hold, doubled: between
	// the two, clocks are not stepped (see steady).
	unfenced    bool
	steadyUntil time.Time

	released map[tagID]bool // tag and incarnation that handed a span back

	pending []*op
	lateErr error // a violation found on a client goroutine
	leases  *leaseTable
}

type row struct{ maxID, step int64 }

// commitKind says what a commit was, for what a long loss may take
// (losable).
type commitKind int

const (
	commitOther   commitKind = iota
	commitReserve            // a reservation or a raise, by commitInc
	commitRenew              // a lease renewal, by commitInc
	commitClaim              // a lease claim
)

// worker is one row of the lease table, times in Unix milliseconds.
type worker struct {
	owner         string
	expires, last int64
	pinned        bool
	// seen is the generation of the record the owner's last claim or
	// renewal was checked against (worker_node.seen_generation).
	seen int64
	// rangeCap is the largest range the owner's reservations take, as
	// its claim recorded it (worker_node.range_cap).
	rangeCap int64
}

type snapshot struct {
	rows    map[string]row
	workers map[int64]worker
	rec     fence.Record
	pos     uint64
	creates int // tags created so far
	// timeline is the server's timeline when the commit was made.
	timeline int
	// kind and inc: what the commit was, and by which incarnation.
	kind commitKind
	inc  int
	// skewed: a process's clock was off by more than the fence's hold
	// allows when this commit was made (see losable).
	skewed bool
}

// maxLost bounds the commits one failover or restore loses of those a
// process that is gone since made: a replica's lag, a backup's age. The
// fence's automatic margin (two ranges per live instance and one more)
// covers that many reservations of the largest range cap. Reservations
// and renewals of live processes may be lost further back, up to
// maxLostLive commits: the witness raise covers those whatever their
// number (losable).
const (
	maxLost     = 6
	maxLostLive = 96
)

func newDB(w *world) *db {
	d := &db{w: w, rows: map[string]*row{}, workers: map[int64]worker{}, timeline: 1, server: 1, released: map[tagID]bool{}}
	d.leases = &leaseTable{db: d}
	// Migrate records the new store's identity (fence.First); edge is
	// there from the start, in the first state a loss of history may go
	// back to.
	if _, err := fence.First(context.Background(), d.tx(&proc{w: w}), w.start); err != nil {
		panic(err) // the simulator's primitives do not fail
	}
	d.rows["edge"] = &row{maxID: edgeStart, step: 10}
	d.dirty = false
	d.history = []snapshot{d.snap()}
	return d
}

// late records a violation found on a goroutine other than the
// simulator's; settle returns it.
func (db *db) late(err error) {
	if db.lateErr == nil {
		db.lateErr = err
	}
}

func (db *db) snap() snapshot {
	s := snapshot{rows: make(map[string]row, len(db.rows)), workers: maps.Clone(db.workers), rec: db.rec, pos: db.pos, creates: db.creates, timeline: db.timeline}
	for k, r := range db.rows {
		s.rows[k] = *r
	}
	return s
}

// commit ends a transaction that wrote (mu held).
func (db *db) commit() {
	db.pos++
	s := db.snap()
	s.skewed = db.skewed()
	s.kind, s.inc = db.by, db.byInc
	db.by, db.byInc, db.dirty = commitOther, 0, false
	db.history = append(db.history, s)
	if len(db.history) > 4*maxLostLive {
		db.history = append(db.history[:0:0], db.history[len(db.history)-2*maxLostLive:]...)
	}
}

// identity is what the server says about itself now (mu held): a
// PostgreSQL system identifier, timeline and WAL position, or a MariaDB
// server_id and GTID position, which number no failovers.
func (db *db) identity() fence.Identity {
	if db.w.server == ServerMariaDB {
		return fence.Identity{Kind: fence.MariaDB, System: fmt.Sprint(db.server), Position: fmt.Sprintf("0-%d-%d", db.server, db.pos)}
	}
	lsn := db.pos * 0x28
	return fence.Identity{Kind: fence.Postgres, System: "7301234567890123456",
		Timeline: fmt.Sprintf("%08X", db.timeline), Position: fmt.Sprintf("%X/%X", lsn>>32, lsn&0xffffffff)}
}

// createLate creates the tag late, as an operator does with
// `idgen tag create`, for the process that runs with auto-create off.
func (db *db) createLate() {
	db.mu.Lock()
	defer db.mu.Unlock()
	if _, ok := db.rows["late"]; !ok {
		db.rows["late"] = &row{maxID: fence.Start(db.rec, 1), step: 10}
		db.creates++
		db.commit()
	}
}

func (db *db) setStep(tag string, step int64) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if r, ok := db.rows[tag]; ok {
		r.step = step
		db.commit()
	}
}

// maxFences is sqlstore's bound on the fences one call goes through.
const maxFences = 3

// checked is the start of a checked transaction of process p, as
// sqlstore.Guard.run and Store.advanceOnce run it: read the server's
// identity and the record (a process that knows the store reads the
// record from its memory, as the one-statement reservation does), and
// run package fence's check (fence.Check, which raises what p reserved
// after a new record), fencing first (fence.RunFence) if the verdict
// says so. It returns the reading the transaction goes on with (mu
// held). lock, if set, is the transaction's first read, before the check
// writes anything: the row a reservation locks, read in the same
// statement as the identity.
func (db *db) checked(p *proc, fast bool, lock func()) (fence.Reading, error) {
	tx := db.tx(p)
	for fences := 0; ; fences++ {
		if lock != nil {
			lock()
		}
		snap := p.mem
		r := fence.Reading{Cur: db.identity(), Rec: db.rec}
		if fast && snap.Known {
			r.Rec = fence.Record{Identity: snap.Identity, Generation: snap.Generation}
		}
		p.holdUntil = max(p.holdUntil, r.Rec.FenceUntil)
		if db.w.cfg.Plant == PlantNoFence {
			return r, nil
		}
		d, err := fence.Check(context.Background(), tx, p.hw, snap, &r)
		if err != nil {
			return r, err
		}
		if d.Verdict == fence.Proceed {
			return r, nil
		}
		if fences == maxFences {
			return r, fmt.Errorf("sim: the store's identity changed %d times during one call; last: %s", fences, d.Reason)
		}
		db.fence(p, snap, nil)
	}
}

// checkFirst is a check (sqlstore's Guard.Check, or a lease renewal) by
// the process that saw the newest record, before any other process
// reaches the store: the first to reach it after a loss of history is
// one that saw what was lost.
func (db *db) checkFirst() {
	db.mu.Lock()
	defer db.mu.Unlock()
	p := db.w.procs[0]
	for _, q := range db.w.procs[1:] {
		if q.mem.Generation > p.mem.Generation {
			p = q
		}
	}
	r, err := db.checked(p, false, nil)
	db.w.trace("  check by %d.%d: %v", p.id, p.inc, err)
	if err == nil {
		db.commitIfDirty()
		db.observe(p, r)
	}
}

// observe is Guard.committed: what p remembers after a checked
// transaction that committed and whose answer it got.
func (db *db) observe(p *proc, r fence.Reading) {
	p.mem = p.mem.Observe(r.Cur, r.Rec)
	p.holdUntil = max(p.holdUntil, r.Rec.FenceUntil)
	p.hw.Witnessed(r.Witnessed)
}

// held is sqlstore's reservation hold (mu held): while the last fence's
// hold lasts, as far as p knows (a record it read), a reservation waits
// until every other lease the fence held has been renewed or claimed
// against a record at least that new (fence.Holding).
func (db *db) held(p *proc, now time.Time) error {
	if db.w.cfg.Plant == PlantNoHold || now.UnixMilli() >= p.holdUntil {
		return nil
	}
	var ws []fence.Worker
	for _, wk := range db.workers {
		if wk.owner != p.owner {
			ws = append(ws, fence.Worker{Owned: wk.owner != "", Expires: wk.expires, Seen: wk.seen})
		}
	}
	if n := fence.Holding(p.fenceCfg, db.rec, now, ws); n > 0 {
		return fmt.Errorf("%w: %d", errHeld, n)
	}
	return nil
}

// fence is sqlstore.Guard.fence on the simulated tables: package fence's
// transaction (fence.RunFence) over the simulator's primitives (tx.go),
// and what p remembers after it (mu held). forced is a regression's
// evidence, as sqlstore's errFence.force.
func (db *db) fence(p *proc, snap fence.Memory, forced *fence.Decision) {
	ev, r, err := fence.RunFence(context.Background(), db.tx(p), p.fenceCfg, p.hw, snap, forced, p.wall)
	if err != nil {
		// The simulator's primitives do not fail.
		db.late(fmt.Errorf("sim: fence: %w", err))
		return
	}
	db.commitIfDirty()
	p.hw.Witnessed(r.Witnessed)
	if ev != nil {
		p.mem = fence.Memory{}.Observe(r.Cur, ev.To)
	} else {
		p.mem = p.mem.Observe(r.Cur, r.Rec)
	}
	if ev == nil || ev.Reason == "" {
		return
	}
	plan := ev.Plan
	db.w.res.Fences++
	db.unfenced, db.steadyUntil = false, time.Now().Add(2*leaseTTL)
	if plan.Lost > 0 {
		db.w.res.LostFences++
	}
	db.w.trace("  fence by %d.%d: %s; margin %d (%d for lost fences, cap %d), %d live, hold until +%dms, generation %d, floor %d",
		p.id, p.inc, ev.Reason, plan.Margin, plan.Lost, plan.RangeCap, plan.Live, plan.HoldUntil-plan.Now, ev.To.Generation, ev.To.Floor)
}

// apply runs o's transaction against the tables (mu held). lost says
// the answer will not reach the caller, who so does not learn what it
// saw.
func (w *world) apply(o *op, lost bool) opResult {
	db := w.db
	r, ok := db.rows[o.tag]
	switch o.kind {
	case opCreate:
		if ok {
			return opResult{err: fmt.Errorf("%w: %q", segment.ErrTagExists, o.tag)}
		}
		// The creation locks the record's row (no fence commits in
		// between) and starts the tag at its floor (fence.Start).
		db.rows[o.tag] = &row{maxID: fence.Start(db.rec, o.a), step: o.b}
		db.creates++
		db.commit()
		return opResult{}
	case opRelease:
		// The hand-back is not checked; until it commits, the row at
		// from is no regression of this process's (HighWater.Releasing).
		done := o.hw.Releasing(o.tag, o.a, o.b)
		if !ok || r.maxID != o.b {
			done(false)
			return opResult{}
		}
		defer done(true)
		if err := w.checkRelease(o); err != nil {
			db.late(err)
		}
		r.maxID = o.a
		db.commit()
		w.res.Releases++
		if db.released[tagID{o.tag, int64(o.inc)}] {
			w.res.MultiSpan++
		}
		db.released[tagID{o.tag, int64(o.inc)}] = true
		return opResult{ok: true}
	}
	// A transaction that fails after the check wrote (the witness raise)
	// rolls back to save; a regression (fence.HighWater.Went) is
	// evidence, and the store fences before the operation runs again, as
	// sqlstore's errFence.force.
	for fences := 0; ; fences++ {
		var save snapshot
		var seen int64
		var snap fence.Memory
		rd, err := db.checked(o.p, true, func() {
			save, snap = db.snap(), o.p.mem
			if r, ok := db.rows[o.tag]; ok {
				seen = r.maxID
			}
		})
		if err != nil {
			db.rollback(save)
			return opResult{err: err}
		}
		r, ok = db.rows[o.tag]
		if !ok { // the fence may have run; rows are the same
			db.rollback(save)
			return opResult{err: fmt.Errorf("%w: %q", segment.ErrTagNotFound, o.tag)}
		}
		if o.kind == opReserve {
			if err := db.held(o.p, o.p.wall()); err != nil {
				db.rollback(save)
				w.res.Held++
				return opResult{err: err}
			}
		}
		if went, hw := o.hw.Went(o.tag, seen); went && w.cfg.Plant != PlantNoRegression {
			db.rollback(save)
			if fences == maxFences {
				return opResult{err: fmt.Errorf("sim: the store's identity changed %d times during one call", fences)}
			}
			w.res.RegressionFences++
			db.fence(o.p, snap, &fence.Decision{Verdict: fence.Fence,
				Reason: fmt.Sprintf("tag %q's max_id %d is below %d, the end of a range this process reserved: the store went back", o.tag, seen, hw)})
			continue
		}
		return w.reserveOrRaise(o, r, rd, save, lost)
	}
}

// reserveOrRaise is the rest of a checked reservation or raise, once
// the check let it go on (mu held).
func (w *world) reserveOrRaise(o *op, r *row, rd fence.Reading, save snapshot, lost bool) opResult {
	db := w.db
	db.by, db.byInc = commitReserve, o.inc
	var res opResult
	switch o.kind {
	case opReserve:
		step := max(o.a, r.step)
		if r.maxID > math.MaxInt64-step {
			db.rollback(save)
			return opResult{err: fmt.Errorf("%w: %q", segment.ErrExhausted, o.tag)}
		}
		rg := segment.Range{Start: r.maxID, End: r.maxID + step, Step: r.step}
		if w.cfg.Plant == PlantOverlap && w.chance(0.05) && rg.Start > step/2 {
			rg.Start -= step / 2 // the planted bug: silently overlap the range before
		}
		r.maxID = rg.End
		db.commit()
		w.res.Reservations++
		o.hw.Reserve(o.tag, rg.End)
		if o.p.inc == o.inc {
			o.p.ranges[o.tag] = append(o.p.ranges[o.tag], rg)
		}
		res = opResult{r: rg}
	default: // opRaise
		if r.maxID < o.a {
			r.maxID = o.a
			db.dirty = true
			res.ok = true
		}
		db.commitIfDirty()
	}
	if !lost {
		db.observe(o.p, rd)
	}
	return res
}

// rollback puts the tables back as they were at s, the start of a
// transaction that failed (mu held).
func (db *db) rollback(s snapshot) {
	db.rows = make(map[string]*row, len(s.rows))
	for k, r := range s.rows {
		db.rows[k] = &r
	}
	db.workers, db.rec = s.workers, s.rec
	db.dirty, db.by, db.byInc = false, commitOther, 0
}
