package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/plant"
)

// FenceObserver is told of each fence this process performed. It must
// not block.
type FenceObserver func(fence.Event)

// Guard checks a store's identity in the transaction of every
// reservation and lease claim or renewal, and fences the store when it
// changed (package fence). One Guard is shared by a backend's Store and
// Leases, so that both remember the same history.
type Guard struct {
	db  DB
	d   Dialect
	id  *IdentitySQL
	cfg fence.Config // this process's own: its RangeCap, and the rest until the store's are read
	// params are the fleet's fence parameters as the store records them
	// (RecordParams), read at start and in every fence: they override
	// the margin and the lease TTL of cfg, so that every fencer, a
	// one-shot command with default flags included, fences as the fleet
	// would.
	params atomic.Pointer[Params]
	// paramsRead is set once this process has read params: its first
	// checked transaction does, whatever it remembers of the store.
	paramsRead atomic.Bool
	log        *slog.Logger
	persist    func(fence.Memory) error
	hook       *retryHook
	obs        atomic.Pointer[FenceObserver]

	fencing sync.Mutex // one fence attempt of this process at a time

	mu  sync.Mutex // guards mem
	mem fence.Memory

	// holdUntil is the end of the newest fence hold this process read in
	// a record or wrote, Unix milliseconds: until then a reservation asks
	// whether other instances hold it back (held). self is the process's
	// owner (GuardOptions.Owner), and owner the owner of the lease this
	// process claimed last through the Guard's Leases, "" if none: its
	// own leases never hold its reservations back.
	holdUntil atomic.Int64
	self      string
	owner     atomic.Pointer[string]

	// hw is what this process reserved through the Guard's Store, per
	// tag: what its witness raise moves the tag's rows up to after a
	// fence, and what a row found below is a regression of
	// (fence.HighWater).
	hw *fence.HighWater

	// steps is the row step of each tag this process reserved, for a
	// witness raise that must create the row (primitives.Raise).
	stepsMu sync.Mutex
	steps   map[string]int64
}

// GuardOptions configures a Guard.
type GuardOptions struct {
	Fence  fence.Config
	Logger *slog.Logger // nil: discard
	// Memory is what the process knows at start (SQLite: its sidecar
	// file). Persist, if set, is given the memory after every checked
	// transaction that committed: never before, since a sidecar ahead of
	// the file would fence a store that lost nothing.
	Memory  fence.Memory
	Persist func(fence.Memory) error
	// Owner is the process's owner in worker_node: the leases it holds
	// (its presence, a generator's worker lease) never hold its own
	// reservations back.
	Owner string
}

// NewGuard returns the Guard of a store on db, or nil if d has no
// IdentitySQL: a nil Guard checks nothing.
func NewGuard(db DB, d Dialect, o GuardOptions) (*Guard, error) {
	if d.Identity == nil {
		return nil, nil //nolint:nilnil // nil is the documented "no fencing"
	}
	cfg, err := o.Fence.Check()
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Guard{db: db, d: d, id: d.Identity, cfg: cfg, log: o.Logger, persist: o.Persist, self: o.Owner, hook: &retryHook{}, mem: o.Memory, hw: &fence.HighWater{}}, nil
}

// Configure replaces the fence configuration and logger, before the
// store is used.
func (g *Guard) Configure(c fence.Config, log *slog.Logger) error {
	if g == nil {
		return nil
	}
	cfg, err := c.Check()
	if err != nil {
		return err
	}
	g.cfg = cfg
	if log != nil {
		g.log = log
	}
	return nil
}

// LeaseTTL is the lease TTL in effect: the fleet's as the store records
// it once this process has read it, its own (Configure) until then.
// A nil Guard has none (0).
func (g *Guard) LeaseTTL() time.Duration {
	if g == nil {
		return 0
	}
	return g.config().LeaseTTL
}

// Params are a fleet's fence parameters as a store records them.
type Params struct {
	Margin   int64         // fence.Config.Margin; 0 is automatic
	LeaseTTL time.Duration // fence.Config.LeaseTTL; 0 is not recorded
}

// config is the fence configuration in effect: this process's, with the
// store's recorded margin and lease TTL.
func (g *Guard) config() fence.Config {
	c := g.cfg
	if p := g.params.Load(); p != nil && p.LeaseTTL > 0 && !plant.On("F4") {
		c.Margin, c.LeaseTTL, c.LeaseMargin = p.Margin, p.LeaseTTL, p.LeaseTTL/10
	}
	return c
}

// readParams reads the store's fence parameters and adopts them.
func (g *Guard) readParams(ctx context.Context, q Querier) (Params, error) {
	var p Params
	var ttl int64
	if err := q.QueryRow(ctx, g.id.Params).Scan(&p.Margin, &ttl); err != nil {
		return Params{}, fmt.Errorf("read the fleet's fence parameters (migration 00015): %w", err)
	}
	p.LeaseTTL = time.Duration(ttl) * time.Millisecond
	if p.LeaseTTL > 0 {
		g.params.Store(&p)
	}
	g.paramsRead.Store(true)
	return p, nil
}

// ReadParams adopts the fleet's fence parameters as the store records
// them, unless this process has read them already: what a presence lease
// reads before its first claim, so that it is renewed on the fleet's
// lease TTL from the start.
func (g *Guard) ReadParams(ctx context.Context) error {
	if g == nil || g.paramsRead.Load() {
		return nil
	}
	_, err := g.readParams(ctx, g.db)
	return err
}

// ErrParams is returned by RecordParams for a process whose fence
// parameters differ from those the store recorded for the instances
// that hold live leases.
var ErrParams = errors.New("store: this process's fence parameters differ from the fleet's")

// RecordParams records this process's margin and lease TTL as the
// fleet's, unless another process holds a live lease: then they must be
// the ones recorded, or it returns ErrParams naming both. What serve
// does at start, before it claims any lease: the first instance of a
// fleet, or the first after every instance stopped, sets them.
func (g *Guard) RecordParams(ctx context.Context) error {
	if g == nil {
		return nil
	}
	own := g.cfg
	return g.db.InTx(ctx, func(q Querier) error {
		if err := (primitives{g, q}).Lock(ctx); err != nil {
			return err
		}
		rec, err := g.readParams(ctx, q)
		if err != nil {
			return err
		}
		if rec.LeaseTTL == own.LeaseTTL && rec.Margin == own.Margin {
			return nil
		}
		var live int64
		if err := q.QueryRow(ctx, g.id.LiveOthers, time.Now().UnixMilli()).Scan(&live); err != nil {
			return fmt.Errorf("count live leases: %w", err)
		}
		if live > 0 && rec.LeaseTTL > 0 {
			return fmt.Errorf("%w: the store records --lease-ttl %v and --fence-margin %d, this process has --lease-ttl %v and --fence-margin %d, and %d leases are live: "+
				"start it with the fleet's values, or stop every instance (and wait one lease TTL) to change them",
				ErrParams, rec.LeaseTTL, rec.Margin, own.LeaseTTL, own.Margin, live)
		}
		if _, err := q.Exec(ctx, g.id.SetParams, own.Margin, own.LeaseTTL.Milliseconds()); err != nil {
			return fmt.Errorf("record the fleet's fence parameters: %w", err)
		}
		p := Params{Margin: own.Margin, LeaseTTL: own.LeaseTTL}
		g.params.Store(&p)
		g.paramsRead.Store(true)
		return nil
	})
}

// ObserveRetries makes f count the fences retried after a retryable
// error, as "fence".
func (g *Guard) ObserveRetries(f RetryObserver) {
	if g != nil {
		g.hook.ObserveRetries(f)
	}
}

// ObserveFences makes f hear of every fence this process performs.
func (g *Guard) ObserveFences(f FenceObserver) {
	if g != nil {
		g.obs.Store(&f)
	}
}

// Memory returns what the process remembers of the store.
func (g *Guard) Memory() fence.Memory {
	if g == nil {
		return fence.Memory{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mem
}

// reading is one read of the identity columns: the server's, and the
// record's unless it came from the process's memory. witnessed is the
// generation whose witness raise ran in the reading's transaction, 0 if
// none did.
type reading struct {
	cur       fence.Identity
	rec       fence.Record
	witnessed int64
}

func (g *Guard) newReading() *reading {
	r := &reading{}
	r.cur.Kind = g.id.Kind
	return r
}

// serverDest is dest without the record, for a reading whose record is
// the one the process saw (fromMemory).
func (r *reading) serverDest() []any {
	return []any{&r.cur.System, &r.cur.Timeline, &r.cur.Position, &r.cur.Node}
}

// fromMemory takes the record from snap, the record the process saw
// last: what a reading of the server alone is checked against.
func (r *reading) fromMemory(snap fence.Memory) {
	r.rec = fence.Record{Identity: snap.Identity, Generation: snap.Generation}
}

// dest is where IdentityColumns' columns go.
func (r *reading) dest() []any {
	return []any{&r.cur.System, &r.cur.Timeline, &r.cur.Position, &r.cur.Node,
		&r.rec.System, &r.rec.Timeline, &r.rec.Position, &r.rec.Generation, &r.rec.FenceUntil,
		&r.rec.Floor, &r.rec.Covers}
}

// fixup fills in what the columns do not carry: the record's kind, from
// the server's.
func (r *reading) fixup() {
	r.rec.Kind = r.cur.Kind
	if !r.rec.Recorded() {
		r.rec.Kind = ""
	}
}

// errFence is returned inside a transaction that must not go on: it
// rolls back, the store fences, and the operation runs again. force is
// evidence the identity does not carry (a row or a lease of this
// process's that went back): the store is fenced even though Decide
// proceeds.
type errFence struct {
	d     fence.Decision
	force bool
	// still, for forced evidence, tells under the idgen_fence lock
	// whether the evidence still stands: another process's fence may have
	// dealt with it since it was seen (raised the row, or been recorded
	// after the lease was told), and a second fence for one loss would
	// only hold reservations again.
	still func(ctx context.Context, q Querier) (bool, error)
}

func (e *errFence) Error() string { return "store: fence needed: " + e.d.Reason }

// check decides on r against snap, the memory taken before the statement
// was sent, with the protocol's check (fence.Check: the witness raise,
// Tick). It returns *errFence unless the operation may go on.
func (g *Guard) check(ctx context.Context, q Querier, snap fence.Memory, r *reading) error {
	r.fixup()
	g.sawHold(r.rec.FenceUntil)
	fr := fence.Reading{Cur: r.cur, Rec: r.rec, Witnessed: r.witnessed}
	d, err := fence.Check(ctx, primitives{g, q}, g.hw, snap, &fr)
	if err != nil {
		return err
	}
	if d.Verdict != fence.Proceed {
		return &errFence{d: d}
	}
	r.cur, r.witnessed = fr.Cur, fr.Witnessed
	return nil
}

// sawHold remembers a fence's hold that ends at until.
func (g *Guard) sawHold(until int64) {
	for {
		h := g.holdUntil.Load()
		if until <= h || g.holdUntil.CompareAndSwap(h, until) {
			return
		}
	}
}

// ErrHeld is returned, wrapping segment.ErrUnavailable, for a segment
// reservation or a lock grant held back after a fence until the other
// instances with a lease have checked in (fence.Holding): callers retry,
// as after any outage, and instances hand out what they buffered
// meanwhile. A waiting lock Acquire waits it out.
var ErrHeld = fmt.Errorf("%w: reservations and lock grants are held after a fence until every instance has checked in", segment.ErrUnavailable)

// held returns ErrHeld while, after a fence, the leases of other
// instances hold reservations back: one more statement, and only while
// a hold this process knows of lasts.
func (g *Guard) held(ctx context.Context, q Querier) error {
	now := time.Now().UnixMilli()
	if g == nil || now >= g.holdUntil.Load() {
		return nil
	}
	own := ""
	if o := g.owner.Load(); o != nil {
		own = *o
	}
	var n int64
	if err := q.QueryRow(ctx, g.id.HeldBack, now, own, g.self, g.config().HoldSpan()).Scan(&n); err != nil {
		return fmt.Errorf("count the leases holding reservations back: %w", err)
	}
	if n > 0 {
		return idgen.WithRetryAfter(fmt.Errorf("%w (%d to go)", ErrHeld, n), time.Second)
	}
	return nil
}

// checkedIn records that the lease worker of owner was checked against
// a record of generation gen, and that owner is this process's.
// It returns how many rows it matched: 0 if the row is not owner's.
func (g *Guard) checkedIn(ctx context.Context, q Querier, gen, worker int64, owner string) (int64, error) {
	if g == nil {
		return 0, nil
	}
	g.owner.Store(&owner)
	n, err := q.Exec(ctx, g.id.CheckedIn, gen, worker, owner)
	if err != nil {
		return 0, fmt.Errorf("record the lease's check-in: %w", err)
	}
	return n, nil
}

// reserve remembers that this process reserved [start, end) of tag,
// with the row's step.
func (g *Guard) reserve(tag string, start, end, step int64) {
	if g == nil {
		return
	}
	g.hw.ReserveRange(tag, start, end)
	g.stepsMu.Lock()
	defer g.stepsMu.Unlock()
	if g.steps == nil {
		g.steps = map[string]int64{}
	}
	g.steps[tag] = step
}

// stepOf is the row step tag was last reserved with, 1000 (segment's
// default) if this process never reserved it.
func (g *Guard) stepOf(tag string) int64 {
	g.stepsMu.Lock()
	defer g.stepsMu.Unlock()
	if st := g.steps[tag]; st > 0 {
		return st
	}
	return 1000
}

// releasing is called before this process hands back from..to of tag
// (fence.HighWater.Releasing).
func (g *Guard) releasing(tag string, from, to int64) (done func(ok bool)) {
	if g == nil {
		return func(bool) {}
	}
	return g.hw.Releasing(tag, from, to)
}

// went reports whether max_id of tag, read under its row lock, is below
// the end of a range this process reserved (fence.HighWater.Went).
func (g *Guard) went(tag string, maxID int64) (bool, int64) {
	if g == nil {
		return false, 0
	}
	return g.hw.Went(tag, maxID)
}

// save hands m to Persist; a failure weakens what a later process can
// detect, so it is logged, not fatal.
func (g *Guard) save(m fence.Memory) {
	if err := g.persist(m); err != nil {
		g.log.Warn("store: cannot record what this process saw of the store", "err", err)
	}
}

// read reads the identity columns alone and checks them.
//
// A process's first reading also adopts the fleet's fence parameters,
// which its hold checks use from then on: also one that remembers the
// store (a SQLite sidecar), since the parameters may have been recorded
// since.
func (g *Guard) read(ctx context.Context, q Querier, snap fence.Memory) (*reading, error) {
	r, err := g.readAll(ctx, q)
	if err != nil {
		return nil, err
	}
	if !g.paramsRead.Load() {
		if _, err := g.readParams(ctx, q); err != nil {
			return nil, err
		}
	}
	return r, g.check(ctx, q, snap, r)
}

// readAll reads the server's identity and the record.
func (g *Guard) readAll(ctx context.Context, q Querier) (*reading, error) {
	r := g.newReading()
	if err := q.QueryRow(ctx, "SELECT "+IdentityColumns(g.id.Server)).Scan(r.dest()...); err != nil {
		return nil, fmt.Errorf("read the store identity: %w", err)
	}
	return r, g.connSystem(ctx, q, r)
}

// connSystem fills in the system of a reading from ConnSystem.
func (g *Guard) connSystem(ctx context.Context, q Querier, r *reading) error {
	if g.id.ConnSystem == nil {
		return nil
	}
	var err error
	if r.cur.System, err = g.id.ConnSystem(ctx, q); err != nil {
		return fmt.Errorf("read the store identity: %w", err)
	}
	return nil
}

// tickNext is the counter after a Tick.
func tickNext(p string) string {
	var n uint64
	if _, err := fmt.Sscan(p, &n); err != nil {
		return p
	}
	return fmt.Sprint(n + 1)
}

func (g *Guard) snapshot() fence.Memory {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mem
}

// committed records a reading whose transaction committed.
func (g *Guard) committed(r *reading) {
	g.hw.Witnessed(r.witnessed)
	g.mu.Lock()
	g.mem = g.mem.Observe(r.cur, r.rec)
	m := g.mem
	g.mu.Unlock()
	if g.persist != nil {
		g.save(m)
	}
}

// Check reads the identity and the record and runs the check, recording
// or fencing if needed, outside any reservation: what an instance does
// at start, so that the log says at once what it found.
func (g *Guard) Check(ctx context.Context) error {
	if g == nil {
		return nil
	}
	return g.run(ctx, func(snap fence.Memory) (*reading, error) {
		var r *reading
		err := g.db.InTx(ctx, func(q Querier) error {
			if _, err := g.readParams(ctx, q); err != nil {
				return err
			}
			var err error
			r, err = g.read(ctx, q, snap)
			return err
		})
		return r, err
	})
}

// Read returns the server's identity and the store's record, without
// checking them: for tools and tests.
func (g *Guard) Read(ctx context.Context) (fence.Identity, fence.Record, error) {
	if g == nil {
		return fence.Identity{}, fence.Record{}, errors.New("store: this store has no identity to read")
	}
	r, err := g.readAll(ctx, g.db)
	if err != nil {
		return fence.Identity{}, fence.Record{}, fmt.Errorf("store: %w", err)
	}
	r.fixup()
	return r.cur, r.rec, nil
}
