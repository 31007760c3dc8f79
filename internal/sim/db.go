package sim

import (
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
	// PostgreSQL timeline on.
	timeline int
	creates  int        // tags created so far
	history  []snapshot // the state after each of the last commits

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

// worker is one row of the lease table, times in Unix milliseconds.
type worker struct {
	owner         string
	expires, last int64
	pinned        bool
	// seen is the generation of the record the owner's last claim or
	// renewal was checked against (worker_node.seen_generation).
	seen int64
}

type snapshot struct {
	rows    map[string]row
	workers map[int64]worker
	rec     fence.Record
	pos     uint64
	creates int // tags created so far
	// skewed: a process's clock was off by more than the fence's hold
	// allows when this commit was made (see losable).
	skewed bool
}

// maxLost bounds the commits one failover or restore loses: a replica's
// lag, a backup's age. The fence's automatic margin (two ranges per live
// instance and one more) covers that many reservations of rangeCap.
const maxLost = 6

func newDB(w *world) *db {
	d := &db{w: w, rows: map[string]*row{}, workers: map[int64]worker{}, timeline: 1, released: map[tagID]bool{}}
	d.leases = &leaseTable{db: d}
	// edge is there from the start, in the first state a loss of
	// history may go back to.
	d.rows["edge"] = &row{maxID: edgeStart, step: 10}
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
	s := snapshot{rows: make(map[string]row, len(db.rows)), workers: maps.Clone(db.workers), rec: db.rec, pos: db.pos, creates: db.creates}
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
	db.history = append(db.history, s)
	if len(db.history) > 4*maxLost {
		db.history = append(db.history[:0:0], db.history[len(db.history)-2*maxLost:]...)
	}
}

// identity is what the server says about itself now (mu held): a
// PostgreSQL system identifier, timeline and WAL position.
func (db *db) identity() fence.Identity {
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
// record from its memory, as the one-statement reservation does), decide
// with package fence, and fence first if the verdict says so. It returns
// the reading the transaction goes on with (mu held).
func (db *db) checked(p *proc, fast bool) (fence.Identity, fence.Record, error) {
	for fences := 0; ; fences++ {
		snap, cur, rec := p.mem, db.identity(), db.rec
		if fast && snap.Known {
			rec = fence.Record{Identity: snap.Identity, Generation: snap.Generation}
		}
		if db.w.cfg.Plant == PlantNoFence {
			return cur, rec, nil
		}
		d := fence.Decide(snap, cur, rec)
		if d.Verdict == fence.Proceed {
			return cur, rec, nil
		}
		if fences == maxFences {
			return cur, rec, fmt.Errorf("sim: the store's identity changed %d times during one call; last: %s", fences, d.Reason)
		}
		db.fence(p, snap)
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
	cur, rec, err := db.checked(p, false)
	db.w.trace("  check by %d.%d: %v", p.id, p.inc, err)
	if err == nil {
		db.observe(p, cur, rec)
	}
}

// observe is Guard.committed: what p remembers after a checked
// transaction that committed and whose answer it got.
func (db *db) observe(p *proc, cur fence.Identity, rec fence.Record) {
	p.mem = p.mem.Observe(cur, rec)
	p.holdUntil = max(p.holdUntil, rec.FenceUntil)
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
	if n := fence.Holding(db.w.fenceCfg, db.rec, now, ws); n > 0 {
		return fmt.Errorf("%w: %d", errHeld, n)
	}
	return nil
}

// fence is sqlstore.Guard.fenceTx on the simulated tables: decide again
// under the lock, and carry out the plan package fence makes (mu held).
func (db *db) fence(p *proc, snap fence.Memory) {
	cur, rec := db.identity(), db.rec
	d := fence.Decide(snap, cur, rec)
	if d.Verdict == fence.Proceed {
		p.mem = p.mem.Observe(cur, rec)
		p.holdUntil = max(p.holdUntil, rec.FenceUntil)
		return
	}
	now := p.wall()
	to := fence.Record{Identity: cur, Generation: fence.NewGeneration(rec, snap, now), FenceUntil: rec.FenceUntil, Floor: rec.Floor}
	to.Node = ""
	if d.Verdict == fence.Initialize {
		db.rec = to
		db.commit()
		p.mem = fence.Memory{}.Observe(cur, to)
		return
	}
	cfg := db.w.fenceCfg
	var newest int64
	for _, wk := range db.workers {
		if wk.owner != "" {
			newest = max(newest, wk.expires)
		}
	}
	live := fence.Live{Since: cfg.CountSince(now, rec, cur, newest)}
	for _, wk := range db.workers {
		if wk.owner != "" && wk.expires > live.Since {
			live.Count++
		}
	}
	plan := fence.NewPlan(cfg, now, rec, snap, cur, live)
	plan.Generation = to.Generation
	if db.w.cfg.Plant == PlantZeroMargin {
		plan.Margin, plan.Floor = 0, rec.Floor
	}
	for _, r := range db.rows {
		if r.maxID > math.MaxInt64-plan.Margin {
			r.maxID = math.MaxInt64
		} else {
			r.maxID += plan.Margin
		}
	}
	for id, wk := range db.workers {
		if wk.owner != "" && wk.expires > plan.LiveSince {
			wk.expires = max(wk.expires, plan.HoldUntil)
		} else if wk.owner != "" && wk.expires > live.Since {
			wk.seen = fence.MustCheckIn // counted, not held: see fence.Holding
		}
		wk.last = max(wk.last, plan.HoldUntil)
		db.workers[id] = wk
	}
	to.FenceUntil = max(to.FenceUntil, plan.HoldUntil)
	to.Floor, to.Covers = plan.Floor, plan.Covers
	db.rec = to
	db.commit()
	p.mem = fence.Memory{}.Observe(cur, to)
	p.holdUntil = max(p.holdUntil, to.FenceUntil)
	db.w.res.Fences++
	db.unfenced, db.steadyUntil = false, time.Now().Add(2*leaseTTL)
	if plan.Lost > 0 {
		db.w.res.LostFences++
	}
	db.w.trace("  fence by %d.%d: %s; margin %d (%d for lost fences), %d live, hold until +%dms, generation %d, floor %d",
		p.id, p.inc, d.Reason, plan.Margin, plan.Lost, live.Count, plan.HoldUntil-plan.Now, to.Generation, to.Floor)
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
		if !ok || r.maxID != o.b {
			return opResult{}
		}
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
	cur, rec, err := db.checked(o.p, true)
	if err != nil {
		return opResult{err: err}
	}
	if r, ok = db.rows[o.tag]; !ok { // the fence may have run; rows are the same
		return opResult{err: fmt.Errorf("%w: %q", segment.ErrTagNotFound, o.tag)}
	}
	var res opResult
	switch o.kind {
	case opReserve:
		if err := db.held(o.p, o.p.wall()); err != nil {
			w.res.Held++
			return opResult{err: err}
		}
		step := max(o.a, r.step)
		if r.maxID > math.MaxInt64-step {
			return opResult{err: fmt.Errorf("%w: %q", segment.ErrExhausted, o.tag)}
		}
		rg := segment.Range{Start: r.maxID, End: r.maxID + step, Step: r.step}
		if w.cfg.Plant == PlantOverlap && w.chance(0.05) && rg.Start > step/2 {
			rg.Start -= step / 2 // the planted bug: silently overlap the range before
		}
		r.maxID = rg.End
		db.commit()
		w.res.Reservations++
		if o.p.inc == o.inc {
			o.p.ranges[o.tag] = append(o.p.ranges[o.tag], rg)
		}
		res = opResult{r: rg}
	default: // opRaise
		if r.maxID < o.a {
			r.maxID = o.a
			db.commit()
			res.ok = true
		}
	}
	if !lost {
		db.observe(o.p, cur, rec)
	}
	return res
}
