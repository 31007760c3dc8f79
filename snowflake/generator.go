package snowflake

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/idgen/idgen"
)

const (
	defaultMaxBackward = 5 * time.Millisecond

	// maxMaxBackward bounds how long Next may sleep: it sleeps holding the
	// generator's lock, so every other caller waits as long.
	maxMaxBackward = time.Second

	// minTimeLeft is how long the time bits must last from New on. A
	// layout that runs out sooner is a mistake to report at start-up, not
	// an outage to discover later.
	minTimeLeft = 365 * 24 * time.Hour
)

// Config configures a Generator. The zero value of every field selects a
// default, so Config{WorkerID: n} is complete.
type Config struct {
	// Epoch is the instant the time bits count from. It must not be in the
	// future, since IDs before it would need negative time, nor before
	// 1970. Only whole milliseconds count. Zero means 2026-01-01 00:00:00
	// UTC.
	Epoch time.Time

	// TimeBits, WorkerBits and SequenceBits divide the 63 bits below the
	// sign bit. Either all three are zero, meaning 41, 10 and 12 (69 years,
	// 1024 workers, 4096 IDs per millisecond per worker), or each is
	// positive and they sum to 63.
	//
	// Together with Epoch they must leave at least 365 days before the
	// time bits run out, counted from the clock's time when New is called.
	// A layout that cannot last a year is rejected rather than left to fail
	// in production. In practice this means at least 35 TimeBits.
	//
	// Generators whose IDs share a keyspace must agree on Epoch and all
	// three widths, or their IDs can collide.
	TimeBits, WorkerBits, SequenceBits int

	// WorkerID is this generator's share of the keyspace; no two
	// generators may use the same one at the same time. It must be in
	// 0..2^WorkerBits-1. Zero is a valid worker ID.
	WorkerID int64

	// MaxBackward is how far the clock may be behind the last timestamp
	// issued (or NotBefore) for Next to wait rather than return
	// ErrClockMovedBackwards. Next waits while holding the generator's
	// lock, so it must not exceed one second. Zero means 5 ms; a negative
	// value means never wait: every backward step is refused.
	MaxBackward time.Duration

	// NotBefore is a floor from an earlier holder of WorkerID, normally the
	// lease table's last_timestamp: the generator issues no ID in the
	// millisecond of NotBefore or any before it. Without it a restarted
	// process whose clock is behind would reissue its predecessor's IDs. If
	// the clock is behind the floor, Next waits or refuses as for any
	// backward clock. Zero, or a time before Epoch, means no floor.
	NotBefore time.Time

	// Clock supplies time. Nil means the system clock; tests pass a fake.
	Clock Clock
}

// Generator issues IDs for one worker ID. Its methods are safe for
// concurrent use.
//
// A Generator counts time on the clock's monotonic reading, anchored to
// the wall clock when it is created, so the time it puts in IDs moves
// steadily forward whatever the wall clock does between readings. It also
// compares the two readings every time: once they disagree by a
// millisecond or more, the wall clock has been stepped (or the machine was
// suspended), and the Generator re-anchors to the wall clock, because that
// is the time other workers and any restarted process will use. A forward
// step is simply adopted. A backward step leaves the Generator behind
// timestamps it has issued, which it handles like a restart floor: up to
// Config.MaxBackward is waited out, more is refused with
// ErrClockMovedBackwards until the clock has caught up.
type Generator struct {
	layout      Layout
	clock       Clock
	maxBackward time.Duration

	// Derived from layout once, for the hot path.
	epochMs         int64
	timeShift       uint8
	workerShift     uint8
	maxTime, maxSeq int64

	mu         sync.Mutex
	workerID   int64
	lastMs     int64 // ms since epoch of the last ID or floor; -1 if neither
	floorOnly  bool  // lastMs is a floor given to g, not an ID it issued
	nextSeq    int64 // next free sequence in lastMs; maxSeq+1 when used up
	anchorWall time.Time
	anchorMono time.Duration
	paused     error         // returned by Next while non-nil
	deadline   time.Duration // monotonic reading at which Next stops
	ceilMs     int64         // first millisecond Next may not stamp (SetDeadline)
	lockRounds uint64        // acquisitions of mu by Next and AppendN
}

// New returns a Generator configured by cfg, or an error wrapping
// ErrInvalidConfig that says what to change.
func New(cfg Config) (*Generator, error) {
	layout, err := NewLayout(cfg.Epoch, cfg.TimeBits, cfg.WorkerBits, cfg.SequenceBits)
	if err != nil {
		return nil, err
	}
	if cfg.WorkerID < 0 || cfg.WorkerID > layout.MaxWorkerID() {
		return nil, &multiError{
			msg: fmt.Sprintf("snowflake: invalid config: WorkerID %d is not in 0..%d allowed by %d WorkerBits; use a smaller WorkerID or more WorkerBits",
				cfg.WorkerID, layout.MaxWorkerID(), layout.WorkerBits()),
			errs: []error{ErrInvalidConfig, ErrInvalidWorkerID},
		}
	}
	maxBackward := cfg.MaxBackward
	switch {
	case maxBackward == 0:
		maxBackward = defaultMaxBackward
	case maxBackward < 0:
		maxBackward = 0
	case maxBackward > maxMaxBackward:
		return nil, fmt.Errorf("%w: MaxBackward %v exceeds %v: Next waits holding the generator's lock, stalling every caller; lower MaxBackward",
			ErrInvalidConfig, maxBackward, maxMaxBackward)
	}
	clock := cfg.Clock
	if clock == nil {
		clock = systemClock{start: time.Now()}
	}

	wall, mono := clock.Now()
	wall = wall.Round(0) // so that arithmetic below is on the wall clock alone
	epoch, end := layout.Epoch(), layout.End()
	if wall.Before(epoch) {
		return nil, fmt.Errorf("%w: Epoch %s is after the clock's current time %s; IDs would need negative time. Choose an Epoch in the past",
			ErrInvalidConfig, epoch.Format(time.RFC3339Nano), wall.Format(time.RFC3339Nano))
	}
	if !wall.Add(minTimeLeft).Before(end) {
		return nil, fmt.Errorf("%w: with Epoch %s and %d TimeBits, IDs run out at %s, less than %v from now; choose a later Epoch or more TimeBits",
			ErrInvalidConfig, epoch.Format(time.RFC3339), layout.TimeBits(), end.Format(time.RFC3339), minTimeLeft)
	}

	g := &Generator{
		layout:      layout,
		clock:       clock,
		maxBackward: maxBackward,
		epochMs:     layout.norm().epochMs,
		// A valid Layout (checked above) has at most 63 bits in all.
		timeShift:   uint8(layout.WorkerBits() + layout.SequenceBits()), //nolint:gosec // G115: at most 63
		workerShift: uint8(layout.SequenceBits()),                       //nolint:gosec // G115: at most 63
		maxTime:     layout.norm().maxTime(),
		maxSeq:      layout.MaxSequence(),
		workerID:    cfg.WorkerID,
		lastMs:      -1,
		anchorWall:  wall,
		anchorMono:  mono,
		deadline:    math.MaxInt64,
		ceilMs:      math.MaxInt64,
	}
	g.nextSeq = g.maxSeq + 1
	g.raiseFloor(cfg.NotBefore)
	return g, nil
}

// raiseFloor makes g issue nothing at or before the millisecond of floor.
// Resume and New use it; the caller holds g.mu or has not shared g yet.
func (g *Generator) raiseFloor(floor time.Time) {
	var ms int64
	switch {
	case floor.IsZero() || floor.Before(g.layout.Epoch()):
		return
	case floor.After(g.layout.End()):
		ms = g.maxTime // Next will report ErrTimeExhausted.
	default:
		ms = floor.UnixMilli() - g.epochMs
	}
	if ms >= g.lastMs {
		g.floorOnly = ms > g.lastMs || g.floorOnly
		g.lastMs, g.nextSeq = ms, g.maxSeq+1
	}
}

// now returns the generator's time as milliseconds since the epoch, the
// time into that millisecond, and the monotonic reading. The caller holds
// g.mu.
func (g *Generator) now() (ms int64, sub, mono time.Duration) {
	wall, mono := g.clock.Now()
	t := g.anchorWall.Add(mono - g.anchorMono)
	if skew := t.Sub(wall); skew >= time.Millisecond || skew <= -time.Millisecond {
		// A thread descheduled between reading the wall and the monotonic
		// clock looks just like a step. Only a second reading that agrees
		// is believed.
		wall, mono = g.clock.Now()
		t = g.anchorWall.Add(mono - g.anchorMono)
		if skew := t.Sub(wall); skew >= time.Millisecond || skew <= -time.Millisecond {
			g.anchorWall, g.anchorMono = wall.Round(0), mono
			t = g.anchorWall
		}
	}
	return t.UnixMilli() - g.epochMs, time.Duration(t.Nanosecond() % int(time.Millisecond)), mono
}

// span is a run of consecutive sequence numbers in one millisecond.
type span struct{ ms, seq, n, workerID int64 }

// reserve takes up to want (> 0) IDs of one millisecond in one lock round,
// waiting as Next documents.
func (g *Generator) reserve(want int64) (span, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lockRounds++
	if g.paused != nil {
		return span{}, g.paused
	}
	for {
		ms, sub, mono := g.now()
		if mono >= g.deadline || ms >= g.ceilMs {
			return span{}, errDeadline
		}
		if ms > g.lastMs {
			g.floorOnly = false
			if ms > g.maxTime {
				return span{}, g.errExhausted()
			}
			g.lastMs, g.nextSeq = ms, 0
		}
		if ms == g.lastMs && g.nextSeq <= g.maxSeq {
			s := span{ms: ms, seq: g.nextSeq, n: min(want, g.maxSeq+1-g.nextSeq), workerID: g.workerID}
			g.nextSeq += s.n
			return s, nil
		}

		// The clock is behind lastMs, or lastMs's sequence is used up.
		target := g.lastMs
		if g.nextSeq > g.maxSeq {
			if g.lastMs >= g.maxTime {
				return span{}, g.errExhausted()
			}
			target++
		}
		if behind := msDuration(g.lastMs-ms) - sub; behind > g.maxBackward {
			return span{}, g.errBehind(behind)
		}
		g.clock.Sleep(msDuration(target-ms) - sub)
	}
}

var errDeadline = fmt.Errorf("%w: the lease deadline has passed; renew the lease and call SetDeadline", ErrNoWorkerLease)

// check returns the error Next would return now, without issuing an ID or
// waiting; nil if Next would issue one, possibly after a wait within
// MaxBackward.
func (g *Generator) check() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused != nil {
		return g.paused
	}
	ms, sub, mono := g.now()
	switch {
	case mono >= g.deadline || ms >= g.ceilMs:
		return errDeadline
	case ms > g.maxTime || (ms == g.maxTime && g.lastMs == ms && g.nextSeq > g.maxSeq):
		return g.errExhausted()
	case ms < g.lastMs:
		if behind := msDuration(g.lastMs-ms) - sub; behind > g.maxBackward {
			return g.errBehind(behind)
		}
	}
	return nil
}

// errBehind is the error of a clock behind lastMs by more than
// MaxBackward: ErrClockMovedBackwards after IDs of g's own, and
// ErrFloorAhead (matching both) while lastMs is a floor g was given, so
// that an operator is not sent to check a clock that is right. Either
// knows its RetryAfter: the clock catches up after behind. The caller
// holds g.mu.
func (g *Generator) errBehind(behind time.Duration) error {
	at := g.timeOf(g.lastMs).Format(time.RFC3339Nano)
	if g.floorOnly {
		return idgen.WithRetryAfter(&multiError{
			msg:  fmt.Sprintf("snowflake: worker floor ahead of the clock by %v: this worker ID may not issue before %s (an earlier holder's last ID, or a store fence's hold); no IDs until then", behind, at),
			errs: []error{ErrFloorAhead, ErrClockMovedBackwards},
		}, behind)
	}
	return idgen.WithRetryAfter(fmt.Errorf("%w by %v: the last timestamp issued is %s; no IDs until the clock reaches it", ErrClockMovedBackwards, behind, at), behind)
}

func (g *Generator) errExhausted() error {
	return fmt.Errorf("%w: the layout's last millisecond was %s", ErrTimeExhausted, g.layout.End().Format(time.RFC3339Nano))
}

func (g *Generator) timeOf(ms int64) time.Time { return time.UnixMilli(g.epochMs + ms).UTC() }

// msDuration converts n milliseconds to a Duration, saturating instead of
// overflowing for clocks that are centuries out.
func msDuration(n int64) time.Duration {
	if n < 0 || n > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Millisecond
}

func (g *Generator) id(ms, workerID, seq int64) int64 {
	return ms<<g.timeShift | workerID<<g.workerShift | seq
}

// Next returns a new ID, greater than every ID g has returned before.
//
// When the millisecond's sequence numbers are used up, Next waits for the
// next millisecond. When the clock is behind the last timestamp issued or
// the NotBefore floor, Next waits for it to catch up if that takes no
// longer than Config.MaxBackward (plus up to a millisecond to start a
// fresh one), and otherwise returns ErrClockMovedBackwards without
// waiting. It returns ErrTimeExhausted once the layout's time bits have
// run out, and while g is paused or past its deadline an error matching
// ErrNoWorkerLease.
func (g *Generator) Next() (int64, error) {
	s, err := g.reserve(1)
	if err != nil {
		return 0, err
	}
	return g.id(s.ms, s.workerID, s.seq), nil
}

// NextN returns n new IDs in increasing order, as AppendN(nil, n) does.
func (g *Generator) NextN(n int) ([]int64, error) {
	return g.AppendN(nil, n)
}

// AppendN appends n new IDs to dst in increasing order and returns the
// extended slice, so that callers can reuse a buffer. It takes as many IDs
// as the current millisecond has left under one acquisition of g's lock,
// so other callers are held up for one millisecond's worth at most.
//
// It waits and fails as Next does. On failure the returned slice still
// holds the IDs issued before it, which are valid and will not be issued
// again. A negative n is an error.
func (g *Generator) AppendN(dst []int64, n int) ([]int64, error) {
	if n < 0 {
		return dst, fmt.Errorf("snowflake: negative ID count %d", n)
	}
	dst = slices.Grow(dst, n)
	for left := int64(n); left > 0; {
		s, err := g.reserve(left)
		if err != nil {
			return dst, err
		}
		base := g.id(s.ms, s.workerID, s.seq)
		for i := range s.n {
			dst = append(dst, base+i)
		}
		left -= s.n
	}
	return dst, nil
}

// Pause stops g issuing IDs until Resume: Next and AppendN return cause,
// wrapped so that it also matches ErrNoWorkerLease. A nil cause means
// ErrNoWorkerLease itself. A lease manager calls Pause as soon as it can no
// longer be sure it holds the lease.
//
// Pause waits for calls already issuing to finish, so once it returns,
// LastTimestamp is final until Resume and is safe to persist.
func (g *Generator) Pause(cause error) {
	err := ErrNoWorkerLease
	switch {
	case cause == nil:
	case errors.Is(cause, ErrNoWorkerLease):
		err = cause
	default:
		err = fmt.Errorf("%w: %w", ErrNoWorkerLease, cause)
	}
	g.mu.Lock()
	g.paused = err
	g.mu.Unlock()
}

// Resume lets g issue IDs again, as workerID, never in the millisecond of
// floor or before it (the new lease's LastTimestamp; zero for none). It
// also serves to change the worker ID of a running generator. Whether or
// not the worker ID changes, the next ID is in a later millisecond than
// any issued before, so IDs from g keep increasing.
//
// Resume does not change the deadline; set it first with SetDeadline if
// it has passed. A worker ID that does not fit the layout returns
// ErrInvalidWorkerID and leaves g unchanged.
func (g *Generator) Resume(workerID int64, floor time.Time) error {
	if workerID < 0 || workerID > g.layout.MaxWorkerID() {
		return fmt.Errorf("%w: %d is not in 0..%d", ErrInvalidWorkerID, workerID, g.layout.MaxWorkerID())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.workerID = workerID
	g.nextSeq = g.maxSeq + 1
	g.raiseFloor(floor)
	g.paused = nil
	return nil
}

// SetDeadline makes Next return ErrNoWorkerLease from deadline on, until
// a later SetDeadline; the zero Time removes the deadline. The deadline
// holds on both clocks:
//
//   - on the monotonic clock, so that stepping the wall clock back
//     afterwards does not give the lease more time;
//   - on the time stamped into IDs: no ID carries a timestamp (the start
//     of its millisecond) at or after deadline, so that stepping the wall
//     clock forward, or resuming a machine that was suspended while the
//     monotonic clock stood still, cannot stamp IDs past the lease.
//
// A lease manager sets it on every renewal to the lease's expiry less a
// margin for clock skew. Then a heartbeat that stalls (a long GC pause, a
// starved CPU, a hung database call, a suspended VM) cannot let this
// process go on issuing after another may have claimed the worker ID;
// pausing alone relies on the heartbeat running. The second rule is what
// makes a takeover safe: the next holder issues only after the expired
// lease's expiry (see LeaseStore), and this holder only before it.
func (g *Generator) SetDeadline(deadline time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if deadline.IsZero() {
		g.deadline, g.ceilMs = math.MaxInt64, math.MaxInt64
		return
	}
	switch {
	case deadline.After(g.layout.End()):
		g.ceilMs = math.MaxInt64
	case deadline.Before(g.layout.Epoch()):
		g.ceilMs = math.MinInt64
	default:
		// A deadline inside a millisecond leaves that millisecond usable:
		// its timestamp is before the deadline.
		g.ceilMs = deadline.UnixMilli() - g.epochMs
		if deadline.Nanosecond()%int(time.Millisecond) != 0 {
			g.ceilMs++
		}
	}
	// Sub uses the monotonic readings when deadline and wall both carry
	// one, as they do when deadline came from time.Now.
	wall, mono := g.clock.Now()
	d := deadline.Sub(wall)
	switch {
	case d > 0 && mono > math.MaxInt64-d:
		g.deadline = math.MaxInt64
	case d < 0 && mono < math.MinInt64-d:
		g.deadline = math.MinInt64
	default:
		g.deadline = mono + d
	}
}

// WorkerID returns the worker ID g issues IDs with.
func (g *Generator) WorkerID() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.workerID
}

// LastTimestamp returns the millisecond of the last ID issued, or of the
// NotBefore or Resume floor if that is later; the zero Time if there is
// neither. It is the value to persist as the lease's last_timestamp: a
// generator given it as NotBefore will not issue in that millisecond or
// before it.
func (g *Generator) LastTimestamp() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lastMs < 0 {
		return time.Time{}
	}
	return g.timeOf(g.lastMs)
}

// Layout returns the layout of g's IDs, with any defaults filled in.
func (g *Generator) Layout() Layout { return g.layout }

// Decode splits an ID issued by g, or any generator with the same layout,
// into its parts.
func (g *Generator) Decode(id int64) (Parts, error) { return g.layout.Decode(id) }
