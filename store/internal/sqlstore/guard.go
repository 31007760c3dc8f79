package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
)

// FenceObserver is told of each fence this process performed. It must
// not block.
type FenceObserver func(fence.Event)

// Guard checks a store's identity in the transaction of every
// reservation and lease claim or renewal, and fences the store when it
// changed (package fence). One Guard is shared by a backend's Store and
// Leases, so that both remember the same history.
type Guard struct {
	db      DB
	d       Dialect
	id      *IdentitySQL
	cfg     fence.Config
	log     *slog.Logger
	persist func(fence.Memory) error
	hook    *retryHook
	obs     atomic.Pointer[FenceObserver]

	fencing sync.Mutex // one fence attempt of this process at a time

	mu  sync.Mutex // guards mem
	mem fence.Memory

	// holdUntil is the end of the newest fence hold this process read in
	// a record or wrote, Unix milliseconds: until then a reservation asks
	// whether other instances hold it back (held). owner is the owner of
	// the lease this process claimed last through the Guard's Leases, ""
	// if none: its own lease never holds its reservations back.
	holdUntil atomic.Int64
	owner     atomic.Pointer[string]

	// reserved is, per tag, the end of the highest range this process
	// reserved through the Guard's Store: its high-water mark, what its
	// witness raise moves the tag's row up to after a fence (witness).
	// witnessed is the newest record generation a witness raise of this
	// process committed against.
	resMu     sync.Mutex
	reserved  map[string]int64
	handing   map[string][2]int64 // hand-backs in flight: from, to
	witnessed atomic.Int64
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
	return &Guard{db: db, d: d, id: d.Identity, cfg: cfg, log: o.Logger, persist: o.Persist, hook: &retryHook{}, mem: o.Memory}, nil
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
}

func (e *errFence) Error() string { return "store: fence needed: " + e.d.Reason }

// check decides on r against snap, the memory taken before the statement
// was sent, and runs Tick. It returns *errFence unless the operation may
// go on.
func (g *Guard) check(ctx context.Context, q Querier, snap fence.Memory, r *reading) error {
	r.fixup()
	g.sawHold(r.rec.FenceUntil)
	if d := fence.Decide(snap, r.cur, r.rec); d.Verdict != fence.Proceed {
		return &errFence{d: d}
	}
	if err := g.witness(ctx, q, r); err != nil {
		return err
	}
	if g.id.Tick != "" {
		if _, err := q.Exec(ctx, g.id.Tick); err != nil {
			return err
		}
		r.cur.Position = tickNext(r.cur.Position)
	}
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
// reservation held back after a fence until the other instances with a
// lease have checked in (fence.Holding): callers retry, as after any
// outage, and instances hand out what they buffered meanwhile.
var ErrHeld = fmt.Errorf("%w: reservations are held after a fence until every instance has checked in", segment.ErrUnavailable)

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
	if err := q.QueryRow(ctx, g.id.HeldBack, now, own, g.cfg.HoldSpan()).Scan(&n); err != nil {
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
		return 0, fmt.Errorf("record the lease's check (is migration 00011 applied?): %w", err)
	}
	return n, nil
}

// reserve remembers that this process reserved tag up to end.
func (g *Guard) reserve(tag string, end int64) {
	if g == nil {
		return
	}
	g.resMu.Lock()
	defer g.resMu.Unlock()
	if g.reserved == nil {
		g.reserved = map[string]int64{}
	}
	g.reserved[tag] = max(g.reserved[tag], end)
}

// releasing is called before this process hands back from..to of tag;
// done says whether the hand-back committed. Until then, a reservation
// of this process that finds max_id at from is not a regression (went).
func (g *Guard) releasing(tag string, from, to int64) (done func(ok bool)) {
	if g == nil {
		return func(bool) {}
	}
	g.resMu.Lock()
	if g.handing == nil {
		g.handing = map[string][2]int64{}
	}
	g.handing[tag] = [2]int64{from, to}
	g.resMu.Unlock()
	return func(ok bool) {
		g.resMu.Lock()
		defer g.resMu.Unlock()
		delete(g.handing, tag)
		if ok && g.reserved[tag] == to {
			g.reserved[tag] = from
		}
	}
}

// went reports whether max_id of tag, read under its row lock, is below
// the end of a range this process reserved: the row went back (a
// restore, a lagging node) although the identity may not show it.
func (g *Guard) went(tag string, maxID int64) (bool, int64) {
	if g == nil {
		return false, 0
	}
	g.resMu.Lock()
	defer g.resMu.Unlock()
	hw := g.reserved[tag]
	if h, ok := g.handing[tag]; ok && maxID == h[0] && hw == h[1] {
		return false, hw
	}
	return maxID < hw, hw
}

// witness is the witness raise: the first transaction of this process
// that is checked against a record newer than the last it witnessed
// raises every tag this process reserved to the end of the highest range
// it reserved, before it checks its lease in (checkedIn) and before its
// next reservation. After a fence, others' reservations wait until every
// live lease has checked in (fence.Holding): so a range a live instance
// holds that the store lost is above the rows before anyone reserves
// again, whatever its step, and the fence's margin is left to cover only
// the instances that are gone. One UPDATE per tag per new generation;
// tags are raised in name order, so that two witnesses take row locks in
// one order.
func (g *Guard) witness(ctx context.Context, q Querier, r *reading) error {
	gen := r.rec.Generation
	if gen <= g.witnessed.Load() {
		return nil
	}
	g.resMu.Lock()
	tags := make([]string, 0, len(g.reserved))
	for t, end := range g.reserved {
		if end > 0 {
			tags = append(tags, t)
		}
	}
	ends := make(map[string]int64, len(tags))
	for _, t := range tags {
		ends[t] = g.reserved[t]
	}
	g.resMu.Unlock()
	slices.Sort(tags)
	for _, t := range tags {
		if _, err := q.Exec(ctx, g.d.Witness, ends[t], t, ends[t]); err != nil {
			return fmt.Errorf("raise %q to what this process reserved: %w", t, err)
		}
	}
	r.witnessed = gen
	return nil
}

// sawWitness records that a witness raise against gen committed.
func (g *Guard) sawWitness(gen int64) {
	for {
		w := g.witnessed.Load()
		if gen <= w || g.witnessed.CompareAndSwap(w, gen) {
			return
		}
	}
}

// save hands m to Persist; a failure weakens what a later process can
// detect, so it is logged, not fatal.
func (g *Guard) save(m fence.Memory) {
	if err := g.persist(m); err != nil {
		g.log.Warn("store: cannot record what this process saw of the store", "err", err)
	}
}

// read reads the identity columns alone and checks them.
func (g *Guard) read(ctx context.Context, q Querier, snap fence.Memory) (*reading, error) {
	r, err := g.readAll(ctx, q)
	if err != nil {
		return nil, err
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
	g.sawWitness(r.witnessed)
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
