package fence

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// ErrInvalidConfig is returned by Config.Check for a Config that cannot
// be used.
var ErrInvalidConfig = errors.New("fence: invalid config")

// The defaults of Config, the same as serve's.
const (
	DefaultRangeCap = 1_000_000
	DefaultLeaseTTL = 30 * time.Second
)

// Config is how a store fences. The zero value of every field selects
// the default written next to it.
type Config struct {
	// Margin is how far every tag's max_id moves up in a fence, per
	// failover counted (at least MinFailovers; see Failovers). It covers
	// the IDs that instances which are gone may have handed out from
	// ranges the store lost; live instances raise their own tags to what
	// they reserved when they check in (the witness raise), and
	// reservations wait for them. Zero means 2 × C × (I + 1), where C is
	// the larger of RangeCap and what the store says (Live.RangeCap: the
	// largest row step, and the largest cap a lease recorded), I is the
	// number of leases live within the last LeaseTTL at the fence (every
	// serve process holds a worker or a presence lease) and the 1 stands
	// for a process the store lost all trace of, such as one whose only
	// claim was lost: each instance holds at most two ranges of a tag
	// (its current one and the next) while a range outlasts the
	// replication lag.
	Margin int64
	// RangeCap is the largest range one reservation of this process
	// takes: the larger of serve's --max-step and --max-range. Each
	// claim records it on the lease row, for the margin of any fencer.
	// Zero means 1,000,000.
	RangeCap int64
	// LeaseTTL is the snowflake worker lease TTL of the instances sharing
	// the store (serve's --lease-ttl). Zero means 30s.
	LeaseTTL time.Duration
	// LeaseMargin is the allowance for clock skew between instances added
	// to the hold. Zero means LeaseTTL/10, as snowflake.LeasedConfig's
	// Margin.
	LeaseMargin time.Duration
}

// Check fills in the defaults and checks c.
func (c Config) Check() (Config, error) {
	if c.Margin < 0 {
		return c, fmt.Errorf("%w: margin %d is negative", ErrInvalidConfig, c.Margin)
	}
	if c.RangeCap < 0 {
		return c, fmt.Errorf("%w: range cap %d is negative", ErrInvalidConfig, c.RangeCap)
	}
	if c.RangeCap == 0 {
		c.RangeCap = DefaultRangeCap
	}
	if c.LeaseTTL < 0 || c.LeaseMargin < 0 {
		return c, fmt.Errorf("%w: lease TTL %v and margin %v must not be negative", ErrInvalidConfig, c.LeaseTTL, c.LeaseMargin)
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseMargin == 0 {
		c.LeaseMargin = c.LeaseTTL / 10
	}
	return c, nil
}

// Plan is what one fence does, in numbers; times are Unix milliseconds
// on the fencing process's clock.
type Plan struct {
	Now int64
	// Margin is added to every tag's max_id (of every sequence table the
	// store has): the configured or automatic margin (Config.Margin), plus
	// Lost, or that margin once per failover since the record
	// (Failovers), whichever is larger.
	Margin int64
	// Failovers is how many promotions the server's history went through
	// since the record: on PostgreSQL, how far the timeline moved on, at
	// least 1; 1 elsewhere, where nothing counts them.
	Failovers int64
	// Lost is what the fences the record lost had added: the floor the
	// fencing process saw above the record's (Memory.Floor −
	// Record.Floor), 0 if it saw none. Ranges reserved after a lost
	// fence start that far above the rows it raised, so the margin
	// covers them only with it added.
	Lost int64
	// Floor is the new record's Floor: the record's plus Margin, which
	// is at least the highest floor the fencing process saw plus the
	// configured margin.
	Floor int64
	// Covers is the new record's Covers: the newest generation the
	// fencing process knew of, the record's or the one it saw.
	Covers int64
	// LiveSince: every worker lease whose expiry is after it, live at
	// some point within the last LeaseTTL, is held (its owner kept, its
	// expiry raised) until HoldUntil. Not the leases that lapsed before,
	// even those the margin counts (CountSince): a lapsed lease's owner
	// has stopped stamping, another instance may have claimed the worker
	// ID since in a commit the store lost, and holding the lease would
	// let the first owner renew and stamp beside it. A holder whose renewal was lost
	// renewed at most LeaseTTL before now, while its lease was live, so
	// the expiry the store kept is after LiveSince and the expiry it was
	// told is before HoldUntil; it renews on as the owner.
	LiveSince int64
	// HoldUntil is now + LeaseTTL + LeaseMargin. Besides the hold, every
	// worker's last_timestamp floor is raised to it, and every claim that
	// commits before it starts its IDs at it (Record.FenceUntil), also of
	// worker IDs whose rows are missing: a holder whose claim was lost
	// entirely, or whose row was seeded and lost with it, stamps no ID at
	// or after the expiry it was told, which is before HoldUntil. So no
	// new claimer can issue an ID a lost holder may still issue.
	HoldUntil int64
	// Generation is the new record's.
	Generation int64
	// Live is the number of leases counted live, which the automatic
	// margin is computed from.
	Live int64
	// RangeCap is the largest range of one reservation the automatic
	// margin is computed from: the fencer's Config.RangeCap, or what the
	// store recorded (Live.RangeCap) if larger.
	RangeCap int64
}

// LiveSince returns the time, in Unix milliseconds, after which a lease
// expiry counts as live within the last TTL at now.
func (c Config) LiveSince(now time.Time) int64 { return now.UnixMilli() - c.LeaseTTL.Milliseconds() }

// CountSince returns the time, in Unix milliseconds, after which a lease
// expiry counts toward the automatic margin of a fence at now that finds
// rec on a server that says cur: the argument of the count of Live. It
// may reach further back than Plan.LiveSince, the leases the fence
// holds. newest is the latest expiry of a lease
// with an owner in the store, 0 if there is none.
//
// After one failover, the leases live within the last TTL: LiveSince(now);
// unless every lease has lapsed (a failover slower than the TTL, or
// renewals lost with the commits), then those live within a TTL of the
// newest expiry, about when the store stopped renewing: instances live
// then may still hold ranges it lost although their leases look lapsed
// now. After several (Failovers), what they lost was reserved by
// instances live at any time since the record was written, whose
// renewals the failovers may have lost with the rest: every row with an
// owner counts, however old its expiry (math.MinInt64).
func (c Config) CountSince(now time.Time, rec Record, cur Identity, newest int64) int64 {
	if numbered(rec.Identity, cur) > 1 {
		return math.MinInt64
	}
	if newest > 0 && newest < now.UnixMilli() {
		// Every lease has lapsed: count back from when the newest did,
		// about when the store stopped renewing.
		return newest - c.LeaseTTL.Milliseconds()
	}
	return c.LiveSince(now)
}

// Live is what a fence counted of the worker leases: Count leases whose
// expiry is after Since (CountSince). A zero Since means
// CountSince(now, rec, cur, 0). RangeCap is the largest range one
// reservation of an instance may take, as the store says: the largest
// cap a counted lease recorded and the largest row step of the sequence
// tables; the automatic margin uses it when it exceeds Config.RangeCap.
type Live struct{ Count, Since, RangeCap int64 }

// NewPlan returns the plan of a fence at now, by a process whose memory
// is mem, of a store whose record is rec and whose leases are as live
// says. c must have been through Check.
//
// Why the margin suffices when the record lost fences (a second failover
// within one replication lag of the first, a restore of a copy taken
// before the last fence), given the current identity cur: let S be the state the store came back with.
// Every ID handed out from a range reserved after S is below S's max_id
// plus what was reserved after S plus the margins of the fences
// committed after S, all of which are lost. What was reserved after S is
// what one lag (or one backup's age) holds, which the configured margin
// covers, as for a failover that lost no fence. The lost fences' margins
// sum to Floor(last lost record) − Floor(S's record); a process that saw
// the last lost record has that floor in its memory, so Lost is exactly
// that sum, and S's rows plus Margin are above every ID handed out. A
// process that did not see the lost fences cannot know of them (Lost is
// what it saw, perhaps 0); whoever did finds the record it writes
// covering less than what it saw, and fences again (Decide), with the
// same argument.
//
// On PostgreSQL the server itself counts what such a process cannot
// know: every promotion starts a new timeline, so a timeline k past the
// record's means k failovers since it, each of which lost at most one
// lag of reservations, and each fence among them a margin of at most
// one per failover it followed (by induction on the fences: a fence on
// timeline t after a record on timeline r adds (t − r) margins). The
// lost fences and reservations together are below S's rows plus k
// margins, whoever reaches the store first. MySQL and MariaDB count
// nothing of the kind, so there a process that did not see the lost
// fence still relies on Covers (see docs/deploy.md).
func NewPlan(c Config, now time.Time, rec Record, mem Memory, cur Identity, live Live) Plan {
	if live.Since == 0 {
		live.Since = c.CountSince(now, rec, cur, 0)
	}
	p := Plan{
		Now:        now.UnixMilli(),
		LiveSince:  c.LiveSince(now),
		HoldUntil:  now.UnixMilli() + c.LeaseTTL.Milliseconds() + c.LeaseMargin.Milliseconds(),
		Generation: NewGeneration(rec, mem, now),
		Live:       live.Count,
		Margin:     c.Margin,
		Covers:     max(rec.Generation, mem.Generation),
	}
	p.RangeCap = max(c.RangeCap, live.RangeCap)
	if p.Margin == 0 {
		p.Margin = satMul(satMul(2, p.RangeCap), max(live.Count, 0)+1)
	}
	if mem.Known {
		p.Lost = max(mem.Floor-max(rec.Floor, 0), 0)
	}
	p.Failovers = Failovers(rec.Identity, cur)
	p.Margin = max(satAdd(p.Margin, p.Lost), satMul(p.Margin, p.Failovers))
	p.Floor = satAdd(max(rec.Floor, 0), p.Margin)
	return p
}

// Failovers returns how many promotions a fence counts between the
// recorded identity rec and the server's cur: on PostgreSQL, of one
// system, how far cur's timeline is past rec's, and at least
// MinFailovers in every case.
//
// Why never 1: a count of 1 is exactly what a second failover within one
// replication lag looks like when nothing numbers it. PostgreSQL reuses
// a timeline number when a promoted server dies before any replica
// received its history file, so the next promotion takes the same
// number; MySQL and MariaDB number no promotions at all. A process that
// saw the fence between the two is evidence only while it lives
// (Record.Covers); counting two pays one more margin in IDs for not
// depending on it.
func Failovers(rec, cur Identity) int64 { return max(numbered(rec, cur), MinFailovers) }

// numbered is how many promotions the server itself numbers between rec
// and cur: how far a PostgreSQL timeline moved on, 1 where nothing
// numbers them. The leases a fence counts reach back to the record only
// when the server shows several (CountSince): reaching back on a guess
// would hold reservations for every lease that ever lapsed.
func numbered(rec, cur Identity) int64 {
	if rec.Kind != Postgres || cur.Kind != Postgres || rec.System != cur.System {
		return 1
	}
	r, err1 := strconv.ParseUint(rec.Timeline, 16, 32)
	c, err2 := strconv.ParseUint(cur.Timeline, 16, 32)
	if err1 != nil || err2 != nil || c <= r {
		return 1
	}
	return int64(c - r)
}

// MinFailovers is the fewest failovers a fence counts (Failovers).
const MinFailovers = 2

// satAdd adds non-negative numbers, saturating at the int64 limit: a
// margin that large exhausts every tag, which then refuses rather than
// repeats.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Start is where a tag created with start (its first max_id) on a store
// whose record is rec begins: Floor above it, at most math.MaxInt64 (a
// tag that starts exhausted refuses rather than repeats). The store adds
// it in the creation's own transaction, which writes the record's row
// before it reads the floor, so that no fence commits between the read
// and the insert, also on another node of a multi-primary cluster.
func Start(rec Record, start int64) int64 {
	if rec.Floor <= 0 {
		return start
	}
	if start > math.MaxInt64-rec.Floor {
		return math.MaxInt64
	}
	return start + rec.Floor
}

// satMul multiplies, saturating at a quarter of the int64 range: a
// margin that large leaves room for every tag to go on.
func satMul(a, b int64) int64 {
	const limit = math.MaxInt64 / 4
	if a != 0 && b > limit/a {
		return limit
	}
	return a * b
}

// Event is one fence a process performed, for its log, its metrics and
// tests.
type Event struct {
	From   Record // the record before
	To     Record // the record written
	Reason string // what Decide said
	Plan   Plan
	Tables []string // the sequence tables whose max_id moved up
}

// Worker is a row of the worker lease table as the reservation hold sees
// it (Holding).
type Worker struct {
	Owned   bool  // the row has an owner
	Expires int64 // the lease's expiry, Unix milliseconds
	// Seen is the generation of the record the owner's last claim or
	// renewal was checked against.
	Seen int64
}

// HeldSince returns the expiry, in Unix milliseconds, after which a lease
// was held by the fence that wrote rec: its LiveSince, which is its
// HoldUntil (rec.FenceUntil) less HoldSpan.
func (c Config) HeldSince(rec Record) int64 { return rec.FenceUntil - c.HoldSpan() }

// HoldSpan is, in milliseconds, how far a fence's HoldUntil lies past its
// LiveSince: two TTLs and the lease margin.
func (c Config) HoldSpan() int64 {
	return 2*c.LeaseTTL.Milliseconds() + c.LeaseMargin.Milliseconds()
}

// Holding returns how many of the other instances' leases ws hold a
// segment reservation back at now, after the fence that wrote rec: while
// that fence's hold lasts (now before rec.FenceUntil), every lease it
// held (expiring after HeldSince) or counted (Seen MustCheckIn) whose
// owner has not since been checked against a record at least as new
// (Seen below rec.Generation).
//
// Why: an instance that saw a fence the store has since lost knows what
// the fencer could not (Plan.Lost); it fences again at its next checked
// transaction, which a live lease's renewal is, within a third of a TTL.
// Until it has, ranges reserved after the lost fence may lie above the
// rows, and a reservation would hand them out again. Every instance that
// holds a lease has checked in, or its lease has lapsed, by the end of
// the hold; a reservation waits at most that long, and instances keep
// handing out what they have buffered meanwhile. An instance without a
// lease (a library user of segment alone) is not waited for.
func Holding(c Config, rec Record, now time.Time, ws []Worker) int {
	if now.UnixMilli() >= rec.FenceUntil {
		return 0
	}
	since, n := c.HeldSince(rec), 0
	for _, w := range ws {
		if w.Owned && (w.Expires > since || w.Seen == MustCheckIn) && w.Seen < rec.Generation {
			n++
		}
	}
	return n
}

// Claimable reports whether a claim may take the lease w at now, after
// the fence that wrote rec; mine says the claim is by w's own owner. A
// row is free if it has no owner or its lease has lapsed, except that a
// lapsed lease the fence counted (Seen MustCheckIn) stays its owner's
// while the hold lasts. It is perhaps an instance that renewed in commits
// the store lost and still hands out ranges the store lost: taken over,
// its row would carry the new owner's check-in, and Holding would stop
// waiting for the instance before its witness raise. Its owner may claim
// it again, which checks it in. (The leases the fence held have their
// expiry raised to the hold's end, and so have not lapsed before it.)
func Claimable(rec Record, now time.Time, w Worker, mine bool) bool {
	switch {
	case !w.Owned:
		return true
	case w.Expires > now.UnixMilli():
		return false
	default:
		return mine || w.Seen != MustCheckIn || now.UnixMilli() >= rec.FenceUntil
	}
}

// MustCheckIn is the Seen a fence gives a lease it counted but did not
// hold (Plan.LiveSince, CountSince): lapsed, but perhaps the lease of an
// instance that renewed in commits the store lost and that may have seen
// a lost fence. Reservations wait for it (Holding) until its owner checks
// in, or the hold ends; no other owner may claim it meanwhile
// (Claimable).
const MustCheckIn = -1
