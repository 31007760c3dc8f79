package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
)

// IdentitySQL is the fencing part of a Dialect (see package fence): how
// to read the server's identity and the store's record of it, and how to
// fence. Its statements name the idgen_fence table (migration 00005),
// whose one row has id 1, except Bump, which runs on each sequence table
// the store has. NewDialect renders it from a ServerIdentity.
type IdentitySQL struct {
	Kind fence.Kind
	// Server is a select list of four text expressions, without NULLs:
	// the server's system, timeline, position and node (see
	// fence.Identity). A reservation by a process that has seen the store
	// reads them in its LockRow statement, beside max_id and step, so the
	// check costs no statement and no round trip; the record is read only
	// when they differ from what the process saw (then under the lock,
	// by the fence), or by a process that has seen nothing yet.
	Server string
	// ConnSystem, if set, returns the server's system (the first of the
	// Server columns, which then reads as '') for the connection q runs
	// on: for an identity that is constant per connection and costly to
	// read per statement (PostgreSQL's system_identifier, read from the
	// control file), read once per connection.
	ConnSystem func(ctx context.Context, q Querier) (string, error)
	// Tick, if set, moves the store's own position up by one. It runs in
	// the transaction of every checked operation, for a store whose
	// server has no position of its own (SQLite).
	Tick string
	// Lock locks the idgen_fence row (SELECT … FOR UPDATE, or any read
	// under SQLite's write lock). It returns one integer.
	Lock string
	// Tables returns the names of the sequence tables that exist, of
	// id_sequence and leaf_alloc.
	Tables string
	// Bump, by sequence table, adds a margin to every row's max_id, and
	// sets a row it would carry past the int64 limit to the limit:
	// exhausted, so that it refuses rather than repeats. Args: limit,
	// margin.
	Bump map[string]string
	// CountLive counts worker leases with an owner and an expiry after
	// the argument.
	CountLive string
	// NewestLease returns the latest expiry of a lease with an owner, 0
	// if none. No args.
	NewestLease string
	// Hold raises the expiry of the leases with an owner and an expiry
	// after the second argument to the first. Args: until, since, until.
	Hold string
	// Floor raises every worker's last_timestamp to the argument. Args:
	// until, until.
	Floor string
	// CheckedIn records on a lease the generation of the record its
	// claim or renewal was checked against. Args: generation, worker ID,
	// owner.
	CheckedIn string
	// HeldBack counts the other owners' leases that hold reservations
	// back (fence.Holding), read against the record itself. Args: now,
	// this process's owner ("" if none), fence.Config.HoldSpan.
	HeldBack string
	// MarkCounted gives the leases a fence counted but did not hold
	// fence.MustCheckIn. Args: the count's since, the hold's LiveSince.
	MarkCounted string
	// Write records an identity. Args: backend, system, timeline,
	// position, generation, fence_until, tag_floor, covers, fences added
	// (0 or 1), fenced_at.
	Write string
	// Create takes the idgen_fence row's lock for a tag's creation, by
	// writing it (tag_creates moves up): no fence commits between the
	// creation's read of the floor and its insert, and on Galera the
	// row is in the creation's write set, so that a creation and a fence
	// on two nodes conflict at certification. It touches no row on a
	// store that has none yet, whose floor is 0. No args.
	Create string
	// TagFloor reads tag_floor, 0 without a row. No args.
	TagFloor string
	// RaiseFloor adds to tag_floor, saturating at the int64 limit, for
	// `idgen tag bump --all`. Args: limit, n.
	RaiseFloor string
}

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
// record's unless it came from the process's memory.
type reading struct {
	cur fence.Identity
	rec fence.Record
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
// rolls back, the store fences, and the operation runs again.
type errFence struct{ d fence.Decision }

func (e *errFence) Error() string { return "store: fence needed: " + e.d.Reason }

// check decides on r against snap, the memory taken before the statement
// was sent, and runs Tick. It returns *errFence unless the operation may
// go on.
func (g *Guard) check(ctx context.Context, q Querier, snap fence.Memory, r *reading) error {
	r.fixup()
	g.sawHold(r.rec.FenceUntil)
	if d := fence.Decide(snap, r.cur, r.rec); d.Verdict != fence.Proceed {
		return &errFence{d}
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
// a record of generation gen, and that it is this process's.
func (g *Guard) checkedIn(ctx context.Context, q Querier, gen, worker int64, owner string) error {
	if g == nil {
		return nil
	}
	g.owner.Store(&owner)
	if _, err := q.Exec(ctx, g.id.CheckedIn, gen, worker, owner); err != nil {
		return fmt.Errorf("record the lease's check (is migration 00011 applied?): %w", err)
	}
	return nil
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
	g.mu.Lock()
	g.mem = g.mem.Observe(r.cur, r.rec)
	m := g.mem
	g.mu.Unlock()
	if g.persist != nil {
		g.save(m)
	}
}

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
		if err := g.fence(ctx, snap); err != nil {
			return err
		}
	}
}

// fence fences the store if it still needs it, under the idgen_fence
// row's lock, in one transaction, retried like a reservation after a
// deadlock or a serialization failure (two Galera nodes fencing at once:
// certification lets one through, and the other then finds the record
// and goes on).
func (g *Guard) fence(ctx context.Context, snap fence.Memory) error {
	g.fencing.Lock()
	defer g.fencing.Unlock()
	if now := g.snapshot(); now.Known != snap.Known || now.Generation != snap.Generation {
		return nil // another call of this process dealt with it meanwhile
	}
	var ev *fence.Event
	var r *reading
	err := retry(ctx, g.d, g.hook, "fence", func() error {
		ev, r = nil, nil
		return g.db.InTx(ctx, func(q Querier) error {
			var err error
			ev, r, err = g.fenceTx(ctx, q, snap)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("store: fence: %w", err)
	}
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
// reading it decided on.
func (g *Guard) fenceTx(ctx context.Context, q Querier, snap fence.Memory) (*fence.Event, *reading, error) {
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
	if d.Verdict == fence.Proceed {
		return nil, r, nil
	}
	now := time.Now()
	if g.id.Tick != "" {
		if _, err := q.Exec(ctx, g.id.Tick); err != nil {
			return nil, nil, err
		}
		r.cur.Position = tickNext(r.cur.Position)
	}
	// A first recording keeps the floor (a store whose row was never
	// recorded may have one from `idgen tag bump --all`) and claims to
	// cover nothing.
	to := fence.Record{Identity: r.cur, Generation: fence.NewGeneration(r.rec, snap, now), FenceUntil: r.rec.FenceUntil, Floor: r.rec.Floor}
	to.Node = ""
	ev := &fence.Event{From: r.rec, To: to}
	if d.Verdict == fence.Initialize {
		if err := g.write(ctx, q, to, 0, 0); err != nil {
			return nil, nil, err
		}
		return ev, r, nil
	}
	var newest int64
	if err := q.QueryRow(ctx, g.id.NewestLease).Scan(&newest); err != nil {
		return nil, nil, fmt.Errorf("read the newest lease: %w", err)
	}
	live := fence.Live{Since: g.cfg.CountSince(now, r.rec, r.cur, newest)}
	if err := q.QueryRow(ctx, g.id.CountLive, live.Since).Scan(&live.Count); err != nil {
		return nil, nil, fmt.Errorf("count live leases: %w", err)
	}
	p := fence.NewPlan(g.cfg, now, r.rec, snap, r.cur, live)
	p.Generation = to.Generation
	tables, err := g.tables(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range tables {
		if _, err := q.Exec(ctx, g.id.Bump[t.Name], int64(math.MaxInt64)-p.Margin, p.Margin); err != nil {
			return nil, nil, fmt.Errorf("move %s up: %w", t.Name, err)
		}
		ev.Tables = append(ev.Tables, t.Name)
	}
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

// IdentityColumns returns the select list of the server's four identity
// columns (IdentitySQL.Server) followed by the record's seven, read from
// idgen_fence in SQL every dialect speaks: system, timeline, position
// (text), generation, fence_until, tag_floor and covers (integers).
func IdentityColumns(server string) string {
	const one = "(SELECT %s FROM idgen_fence WHERE id = 1)"
	rec := make([]string, 0, 7)
	for _, c := range []string{"system_id", "timeline", "log_position"} {
		rec = append(rec, "COALESCE("+fmt.Sprintf(one, c)+", '')")
	}
	for _, c := range []string{"generation", "fence_until", "tag_floor", "covers"} {
		rec = append(rec, "COALESCE("+fmt.Sprintf(one, c)+", 0)")
	}
	return server + ", " + strings.Join(rec, ", ")
}
