package fence

import (
	"context"
	"maps"

	"fmt"
	"github.com/idgen/idgen/store/internal/plant"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The protocol: the steps a store takes in a checked transaction and in
// the fence's transaction, written once over the primitives of Tx, which
// the SQL stores (store/internal/sqlstore) implement in SQL.

// Tx is what the protocol needs of one transaction of a store: small
// reads and writes of its fence record, its worker lease table and its
// sequence tables, each of which the protocol calls at most once per
// step. Times are Unix milliseconds. Every method takes the context of
// the transaction.
type Tx interface {
	// Lock takes the lock on the fence record for the rest of the
	// transaction: one fence of the store at a time.
	Lock(ctx context.Context) error
	// Read reads the server's identity and the store's record.
	Read(ctx context.Context) (Identity, Record, error)
	// Tick moves the position of a server that has none of its own on by
	// one, and returns cur with the position after it; elsewhere it
	// returns cur.
	Tick(ctx context.Context, cur Identity) (Identity, error)
	// Used reports whether the store has rows of its own: of its
	// id_sequence table or of its worker lease table.
	Used(ctx context.Context) (bool, error)
	// NewestLease returns the latest expiry of a lease with an owner, 0
	// if there is none.
	NewestLease(ctx context.Context) (int64, error)
	// CountLive counts the leases with an owner whose expiry is after
	// since, and returns the largest range cap they recorded (0 if none
	// did): Live without Since.
	CountLive(ctx context.Context, since int64) (count, rangeCap int64, err error)
	// Tables returns the sequence tables the store has.
	Tables(ctx context.Context) ([]string, error)
	// MaxStep returns the largest row step of table, 0 if it is empty.
	MaxStep(ctx context.Context, table string) (int64, error)
	// Bump moves every row of table up by margin, and a row it would
	// carry past the int64 limit to the limit.
	Bump(ctx context.Context, table string, margin int64) error
	// Hold raises to until the expiry of the leases with an owner whose
	// expiry is after liveSince (Plan.LiveSince, Plan.HoldUntil).
	Hold(ctx context.Context, liveSince, until int64) error
	// MarkCounted gives the leases with an owner whose expiry is after
	// since and at most liveSince the Seen MustCheckIn.
	MarkCounted(ctx context.Context, since, liveSince int64) error
	// Floor raises every worker's last timestamp to until.
	Floor(ctx context.Context, until int64) error
	// Write writes the record to; fenced says whether a fence wrote it
	// (at, its time) rather than a first recording.
	Write(ctx context.Context, to Record, fenced bool, at int64) error
	// Raise moves tag's max_id up to to, never down: the witness raise of
	// one tag (HighWater).
	Raise(ctx context.Context, tag string, to int64) error
	// RaiseToken moves lock name's token mark up to token, never down:
	// the witness raise of one lock (HighWater.Granted), after which the
	// lock's next grant is above token.
	RaiseToken(ctx context.Context, name string, token int64) error
}

// HighWater is what one process reserved of each tag: the end of the
// highest range it reserved, which its witness raise moves the tag's row
// up to after a fence (Witness), and below which the row it finds under
// its lock must not be (Went). It also keeps the newest record generation
// a witness raise of the process committed against. The zero HighWater
// is a process that reserved nothing; it is safe for concurrent use. A
// nil *HighWater reserves nothing and raises nothing.
type HighWater struct {
	mu       sync.Mutex
	reserved map[string]int64
	// handing holds the hand-backs in flight, several per tag when
	// clients of one server close at once. Each must be told apart: one
	// slot per tag let a second hand-back, refused, erase the first one's
	// mark while its compare-and-set had committed, and the next
	// reservation then took the row at from for a store that went back
	// and fenced it.
	handing map[string][]*handBack
	// settled holds, per tag, committed hand-backs whose mark could not
	// move yet: from the row they found (a range's end) to the row they
	// left. Hand-backs of consecutive ranges commit one after another,
	// the higher first, but their callbacks may run in either order.
	settled map[string]map[int64]int64
	// ranges holds, per tag, the ranges the process reserved, by end: a
	// hand-back of a whole range moves the mark to the end of the next
	// range below that the process holds, not to the range's start,
	// since the IDs between may be another process's, handed back in
	// turn (which a fence would take for a regression: the simulator's
	// hand-backs world, seed 9).
	ranges map[string]*held
	// tokens is the highest lock token the process was granted, per lock
	// name, for at most maxTokens names: raised like a tag after a
	// fence, so that a grant lost with a fence's own record (two chained
	// failovers) is not granted again while its holder lives.
	tokens    map[string]int64
	witnessed atomic.Int64
}

// maxTokens bounds the lock names a HighWater keeps tokens of: locks
// may be per user, and a witness raise costs one statement per name. A
// name forgotten only weakens what the process guards.
const maxTokens = 4096

// Granted remembers that the process was granted token of lock name.
func (h *HighWater) Granted(name string, token int64) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tokens == nil {
		h.tokens = map[string]int64{}
	}
	if _, ok := h.tokens[name]; !ok && len(h.tokens) >= maxTokens {
		for n := range h.tokens { // any one
			delete(h.tokens, n)
			break
		}
	}
	h.tokens[name] = max(h.tokens[name], token)
}

// Token returns the highest token of lock name the process remembers
// being granted, 0 if none.
func (h *HighWater) Token(name string) int64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tokens[name]
}

// held is the ranges of one tag, start by end; trimmed says that older
// ones were dropped (maxRanges), so an end below the lowest kept is
// unknown.
type held struct {
	starts  map[int64]int64
	trimmed bool
}

// below returns where tag's mark goes when the process hands back all
// of [from, to): the end of its highest range below, as far as it
// knows, or from. A partial hand-back leaves [start, from) in use.
func (h *HighWater) below(tag string, from, to int64) int64 {
	r := h.ranges[tag]
	if r == nil {
		return from
	}
	start, ok := r.starts[to]
	delete(r.starts, to)
	if !ok || start != from {
		if ok {
			r.starts[from] = start
		}
		return from
	}
	end, found := int64(0), false
	for e := range r.starts {
		if e <= from && e > end {
			end, found = e, true
		}
	}
	if !found && r.trimmed {
		return from
	}
	return end
}

// handBack is a hand-back of from..to in flight; after is the highest
// end this process reserved of the tag since it began, which is where
// the mark goes if it commits.
type handBack struct{ from, to, after int64 }

// Reserve remembers that the process reserved tag up to end.
func (h *HighWater) Reserve(tag string, end int64) { h.ReserveRange(tag, -1, end) }

// maxRanges bounds the ranges a HighWater keeps per tag: the newest.
const maxRanges = 64

// ReserveRange remembers that the process reserved [start, end) of tag;
// a start below 0 is unknown.
func (h *HighWater) ReserveRange(tag string, start, end int64) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reserved == nil {
		h.reserved, h.ranges = map[string]int64{}, map[string]*held{}
	}
	h.reserved[tag] = max(h.reserved[tag], end)
	if start >= 0 {
		r := h.ranges[tag]
		if r == nil {
			r = &held{starts: map[int64]int64{}}
			h.ranges[tag] = r
		}
		r.starts[end] = start
		if len(r.starts) > maxRanges {
			delete(r.starts, slices.Min(slices.Collect(maps.Keys(r.starts))))
			r.trimmed = true
		}
	}
	delete(h.settled, tag)
	for _, b := range h.handing[tag] {
		b.after = max(b.after, end)
	}
}

// Releasing is called before the process hands back from..to of tag;
// done says whether the hand-back committed, and is never called when
// that is unknown (a connection lost around the commit). Until then, a row found at
// from or above is not a regression (Went); once it committed, the
// high-water mark goes back to from, or to the end of what the process
// reserved since, if to was the highest.
func (h *HighWater) Releasing(tag string, from, to int64) (done func(ok bool)) {
	if h == nil {
		return func(bool) {}
	}
	b := &handBack{from: from, to: to}
	h.mu.Lock()
	if h.handing == nil {
		h.handing = map[string][]*handBack{}
	}
	h.handing[tag] = append(h.handing[tag], b)
	h.mu.Unlock()
	return func(ok bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		rest := slices.DeleteFunc(h.handing[tag], func(x *handBack) bool { return x == b })
		if len(rest) == 0 {
			delete(h.handing, tag)
		} else {
			h.handing[tag] = rest
		}
		// Only one hand-back of a tag can commit against a given max_id,
		// and a range reserved before it committed would have made it fail:
		// every end in b.after came after the row went back to from.
		if !ok {
			return
		}
		found, left := max(to, b.after), max(from, b.after)
		if b.after < to {
			left = max(h.below(tag, from, to), b.after)
		}
		if h.reserved[tag] != found && plant.On("F11") {
			return
		}
		if h.reserved[tag] != found {
			// A lower consecutive range's hand-back, whose callback ran
			// before the higher one's: its mark moves once that one's does.
			if h.settled == nil {
				h.settled = map[string]map[int64]int64{}
			}
			if h.settled[tag] == nil {
				h.settled[tag] = map[int64]int64{}
			}
			h.settled[tag][found] = left
			return
		}
		h.reserved[tag] = left
		for {
			next, ok := h.settled[tag][h.reserved[tag]]
			if !ok {
				break
			}
			delete(h.settled[tag], h.reserved[tag])
			h.reserved[tag] = next
		}
		if len(h.settled[tag]) == 0 {
			delete(h.settled, tag)
		}
	}
}

// Went reports whether maxID of tag, read under its row lock, is below
// the end of a range the process reserved, and returns that end: the row
// went back (a restore, a lagging node) although the identity may not
// show it. The store then fences (a regression is evidence). While a
// hand-back of from..to is in flight, a row at from or above, and at
// least at the end of what the process reserved since, is what its
// commit left: none of the process's IDs at or above from was handed
// out, so such a row repeats none of them.
func (h *HighWater) Went(tag string, maxID int64) (bool, int64) {
	if h == nil {
		return false, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	hw := h.reserved[tag]
	// A commit explains a row below the mark only while the mark is the
	// hand-back's end, and only down to from or to what the process
	// reserved since: a range reserved past the end, or above the row,
	// stays evidence. Hand-backs of consecutive ranges, in flight or
	// committed ahead of a higher one, explain it down the chain.
	low := hw
	for changed := true; changed && maxID < low && !plant.On("F11"); {
		changed = false
		if next, ok := h.settled[tag][low]; ok {
			low, changed = next, true
			continue
		}
		for _, b := range h.handing[tag] {
			if to := max(b.from, b.after); low <= b.to && to < low {
				low, changed = to, true
			}
		}
	}
	return maxID < low, hw
}

// Witnessed records that a witness raise against generation gen
// committed.
func (h *HighWater) Witnessed(gen int64) {
	if h == nil {
		return
	}
	for {
		w := h.witnessed.Load()
		if gen <= w || h.witnessed.CompareAndSwap(w, gen) {
			return
		}
	}
}

// marks returns the tags with a mark, in name order, and their marks.
func (h *HighWater) marks() ([]string, map[string]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tags := make([]string, 0, len(h.reserved))
	ends := make(map[string]int64, len(h.reserved))
	for t, end := range h.reserved {
		if end > 0 {
			tags = append(tags, t)
			ends[t] = end
		}
	}
	slices.Sort(tags)
	return tags, ends
}

// grants returns the lock names with a token, in name order, and their
// tokens.
func (h *HighWater) grants() ([]string, map[string]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.tokens)), maps.Clone(h.tokens)
}

// Witness is the witness raise: the first transaction of a process that
// is checked against a record of generation gen newer than the last it
// witnessed raises every tag the process reserved to the end of the
// highest range it reserved, before it checks its lease in and before its
// next reservation. After a fence, others' reservations wait until every
// live lease has checked in (Holding): so a range a live instance holds
// that the store lost is above the rows before anyone reserves again,
// whatever its step, and the fence's margin is left to cover only the
// instances that are gone. Lock tokens are raised the same way, and lock
// grants are held as reservations are. One Raise per tag and one
// RaiseToken per lock per new generation, each in name order, so that two
// witnesses take row locks in one order. It returns gen if it raised (Reading.Witnessed, to be given to
// HighWater.Witnessed once the transaction committed), 0 if it had no
// need to.
func Witness(ctx context.Context, tx Tx, h *HighWater, gen int64) (int64, error) {
	if h == nil || gen <= h.witnessed.Load() {
		return 0, nil
	}
	tags, ends := h.marks()
	for _, t := range tags {
		if err := tx.Raise(ctx, t, ends[t]); err != nil {
			return 0, fmt.Errorf("raise %q to what this process reserved: %w", t, err)
		}
	}
	names, tokens := h.grants()
	for _, n := range names {
		if plant.On("L2") {
			break
		}
		if err := tx.RaiseToken(ctx, n, tokens[n]); err != nil {
			return 0, fmt.Errorf("raise lock %q to the token this process was granted: %w", n, err)
		}
	}
	return gen, nil
}

// Reading is one checked read of a store: the server's identity, the
// record it was checked against, and the generation whose witness raise
// ran in the reading's transaction (0 if none did).
type Reading struct {
	Cur       Identity
	Rec       Record
	Witnessed int64
}

// Check is the check of a transaction that reserves, claims or renews
// with the memory snap, taken before its first statement, on the reading
// r: it decides (Decide), and when the transaction may go on, raises what
// the process reserved if the record is newer than the last it witnessed
// (Witness) and moves the position on (Tx.Tick), updating r. Any other
// verdict is returned for the store to fence before it runs the
// transaction again (RunFence).
func Check(ctx context.Context, tx Tx, h *HighWater, snap Memory, r *Reading) (Decision, error) {
	d := Decide(snap, r.Cur, r.Rec)
	if d.Verdict != Proceed {
		return d, nil
	}
	w, err := Witness(ctx, tx, h, r.Rec.Generation)
	if err != nil {
		return d, err
	}
	r.Witnessed = max(r.Witnessed, w)
	r.Cur, err = tx.Tick(ctx, r.Cur)
	return d, err
}

// RunFence is the fence's transaction, run by a process whose memory is
// snap and whose wall clock is clock, with the fence configuration c (checked): under the
// record's lock it reads the store and decides again, and if the store
// still needs it, fences it with the Plan of NewPlan: every sequence
// table moved up by the margin, the live leases held, the ones counted
// but not held marked, every worker's floor raised, and the record
// written. forced, if set, is evidence of a loss the identity does not
// show (a regression): it fences.
//
// It returns the event if it wrote the record (with an empty Reason for
// a first recording), and the reading it decided on. Whether it fences or
// finds that another process did, it raises what the process reserved
// (Witness) in the same transaction: the fencer's own reservations are
// not held back by its own lease.
func RunFence(ctx context.Context, tx Tx, c Config, h *HighWater, snap Memory, forced *Decision, clock func() time.Time) (*Event, *Reading, error) {
	if err := tx.Lock(ctx); err != nil {
		return nil, nil, err
	}
	cur, rec, err := tx.Read(ctx)
	if err != nil {
		return nil, nil, err
	}
	r := &Reading{Cur: cur, Rec: rec}
	d := Decide(snap, cur, rec)
	if d.Verdict == Proceed && forced != nil {
		// Also when another fence was recorded since snap: it cannot tell
		// whether that fence came before or after what went back (a
		// restore of id_sequence alone keeps the record). The evidence
		// ends with this fence: its witness raise puts this process's
		// rows back above what it reserved, and a lease's evidence holds
		// only against the generation it was told.
		d = *forced
	}
	if d.Verdict == Initialize {
		// A store with rows but no record lost its record (the first
		// recording, with the commits after it) or predates fencing:
		// either way, ranges may have been handed out above its rows.
		used, err := tx.Used(ctx)
		if err != nil {
			return nil, nil, err
		}
		if used {
			d = Decision{Verdict: Fence, Reason: "the store has rows but no identity recorded: the record was lost, or the store predates fencing"}
		}
	}
	if d.Verdict == Proceed {
		r.Witnessed, err = Witness(ctx, tx, h, rec.Generation)
		return nil, r, err
	}
	// The time is read once the lock is held: a fence that waited for
	// another's computes its hold from when it runs.
	now := clock()
	if r.Cur, err = tx.Tick(ctx, r.Cur); err != nil {
		return nil, nil, err
	}
	// A first recording keeps the floor (a store whose row was never
	// recorded may have one from `idgen tag bump --all`) and covers
	// generation 1: a process that saw a record this one replaces (lost,
	// and recorded again) finds it covering less than what it saw, and
	// fences (Decide).
	to := Record{Identity: r.Cur, Generation: NewGeneration(rec, snap, now), FenceUntil: rec.FenceUntil, Floor: rec.Floor, Covers: 1}
	to.Node = ""
	ev := &Event{From: rec, To: to}
	if d.Verdict == Initialize {
		if err := tx.Write(ctx, to, false, 0); err != nil {
			return nil, nil, err
		}
		r.Witnessed = to.Generation
		return ev, r, nil
	}
	newest, err := tx.NewestLease(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read the newest lease: %w", err)
	}
	live := Live{Since: c.CountSince(now, rec, r.Cur, newest)}
	if live.Count, live.RangeCap, err = tx.CountLive(ctx, live.Since); err != nil {
		return nil, nil, fmt.Errorf("count live leases: %w", err)
	}
	tables, err := tx.Tables(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range tables {
		step, err := tx.MaxStep(ctx, t)
		if err != nil {
			return nil, nil, fmt.Errorf("read the largest step of %s: %w", t, err)
		}
		live.RangeCap = max(live.RangeCap, step)
	}
	p := NewPlan(c, now, rec, snap, r.Cur, live)
	p.Generation = to.Generation
	for _, t := range tables {
		if err := tx.Bump(ctx, t, p.Margin); err != nil {
			return nil, nil, fmt.Errorf("move %s up: %w", t, err)
		}
		ev.Tables = append(ev.Tables, t)
	}
	if _, err := Witness(ctx, tx, h, to.Generation); err != nil {
		return nil, nil, err
	}
	r.Witnessed = to.Generation
	if err := tx.Hold(ctx, p.LiveSince, p.HoldUntil); err != nil {
		return nil, nil, fmt.Errorf("hold worker leases: %w", err)
	}
	if live.Since < p.LiveSince {
		if err := tx.MarkCounted(ctx, live.Since, p.LiveSince); err != nil {
			return nil, nil, fmt.Errorf("mark the leases counted: %w", err)
		}
	}
	if err := tx.Floor(ctx, p.HoldUntil); err != nil {
		return nil, nil, fmt.Errorf("raise worker floors: %w", err)
	}
	to.FenceUntil = max(to.FenceUntil, p.HoldUntil)
	to.Floor, to.Covers = p.Floor, p.Covers
	if err := tx.Write(ctx, to, true, p.Now); err != nil {
		return nil, nil, err
	}
	ev.To, ev.Reason, ev.Plan = to, d.Reason, p
	return ev, r, nil
}

// First writes the first record of a new store, one with neither a
// record nor rows, under the record's lock, and reports whether it
// wrote: what a migration does once the schema exists, so that every row
// a store ever has was written under a record, and a store found with
// rows but no record is fenced (RunFence). On any other store it does
// nothing: the first checked transaction decides.
func First(ctx context.Context, tx Tx, now time.Time) (bool, error) {
	if err := tx.Lock(ctx); err != nil {
		return false, err
	}
	cur, rec, err := tx.Read(ctx)
	if err != nil {
		return false, err
	}
	if rec.Recorded() {
		return false, nil
	}
	if used, err := tx.Used(ctx); err != nil || used {
		return false, err
	}
	if cur, err = tx.Tick(ctx, cur); err != nil {
		return false, err
	}
	to := Record{Identity: cur, Generation: NewGeneration(rec, Memory{}, now), FenceUntil: rec.FenceUntil, Floor: rec.Floor, Covers: 1}
	to.Node = ""
	return true, tx.Write(ctx, to, false, 0)
}
