package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/plant"
)

const (
	// seedBatch is how many worker_node rows a claim creates when it finds
	// none free: enough that 16 instances starting together need one
	// round, few enough that the table stays short for a small fleet.
	seedBatch = 64

	// maxWorkerID bounds the worker IDs a claim considers. worker_id is an
	// INT column, and a layout cannot use more than 27 worker bits anyway
	// (New requires 35 time bits).
	maxWorkerID = 1<<30 - 1

	// PresenceFrom is the first worker ID of presence leases (see
	// store.Presence): rows an instance that stamps no snowflake IDs
	// holds so that fences count it and wait for its check-in. No layout
	// reaches them (27 worker bits at most), so they never take a worker
	// ID from a generator.
	PresenceFrom = 1 << 29
	// PresenceTo is one past the last worker ID of presence leases.
	PresenceTo = maxWorkerID + 1
)

// presenceFromSQL is PresenceFrom in a statement.
var presenceFromSQL = fmt.Sprint(PresenceFrom)

var _ snowflake.StaticLeaseStore = (*Leases)(nil)

// Leases is a snowflake.LeaseStore over any SQL backend: the worker_node
// table, whose times are Unix milliseconds from the callers' clocks.
//
// A claim is one short transaction: select the lowest free row under a
// row lock, skipping rows other claims have locked (FOR UPDATE SKIP
// LOCKED; SQLite's BEGIN IMMEDIATE serialises instead), and take it. So
// concurrent claims lock different rows and never wait for each other.
// Rows are created lazily: when no existing row is free, the claim inserts
// the next seedBatch missing worker IDs as free rows, ignoring any that a
// concurrent claim inserted first, and tries again.
//
// Claims through ClaimLayout are also admitted against the layouts the
// table's worker IDs have issued IDs in, recorded in snowflake_layout, in
// the same transaction (see layout.go).
// With a Guard, every claim and renewal checks the store's identity in
// its transaction, and a claim that commits before the end of the last
// fence's hold starts its IDs at it (fence.Plan.HoldUntil).
type Leases struct {
	retryHook
	db    DB
	d     Dialect
	g     *Guard
	owner string // the process's (Owner)

	// told is, per worker ID this process holds, what its last claim or
	// renewal committed: a renewal that finds the lease gone, or older
	// than the holder was told, with no fence since, is evidence that the
	// store went back (Renew); and a claim checks in the owner's other
	// rows (checkIn.done).
	toldMu sync.Mutex
	told   map[int64]told
}

// told is what a claim or renewal of one worker ID committed: its owner,
// the expiry the holder was told, and the generation of the record it
// was checked against.
type told struct {
	owner        string
	expires, gen int64
}

// NewLeases returns a Leases that runs d's worker statements on db.
func NewLeases(db DB, d Dialect) *Leases { return &Leases{db: db, d: d} }

// NewGuardedLeases is NewLeases with the store's identity checked by g
// in every claim and renewal, for the process named owner. A nil g
// checks nothing.
func NewGuardedLeases(db DB, d Dialect, g *Guard, owner string) *Leases {
	s := NewLeases(db, d)
	s.g, s.owner = g, owner
	return s
}

// Owner returns the owner name of the process the table was opened by,
// "" if none: what snowflake.NewLeased claims under when its config names
// none, so that a generator and the store's presence lease are one
// process's and never hold its own reservations back.
func (s *Leases) Owner() string { return s.owner }

// inTx runs fn in one transaction that first reads and checks the
// store's identity (see begin), fencing and running it again as the
// Guard decides. fn gets the floor the last fence set.
func (s *Leases) inTx(ctx context.Context, fn func(q Querier, fenced int64, c checkIn) error) error {
	return s.g.run(ctx, func(snap fence.Memory) (*reading, error) {
		var r *reading
		err := s.db.InTx(ctx, func(q Querier) error {
			var fenced int64
			var err error
			if r, fenced, err = s.begin(ctx, q, snap); err != nil {
				return err
			}
			c := checkIn{g: s.g}
			if r != nil {
				c.gen = r.rec.Generation
			}
			return fn(q, fenced, c)
		})
		return r, err
	})
}

// setTold remembers what a claim or renewal of worker committed.
func (s *Leases) setTold(worker int64, t told) {
	if s.g == nil {
		return
	}
	s.toldMu.Lock()
	defer s.toldMu.Unlock()
	if s.told == nil {
		s.told = map[int64]told{}
	}
	s.told[worker] = t
}

func (s *Leases) forget(worker int64) {
	s.toldMu.Lock()
	defer s.toldMu.Unlock()
	delete(s.told, worker)
}

func (s *Leases) toldOf(worker int64, owner string) (told, bool) {
	s.toldMu.Lock()
	defer s.toldMu.Unlock()
	t, ok := s.told[worker]
	return t, ok && t.owner == owner
}

// heldBy returns the other worker IDs this process was told owner holds,
// in ascending order (the lock order, see others).
func (s *Leases) heldBy(owner string, except int64) []int64 {
	s.toldMu.Lock()
	defer s.toldMu.Unlock()
	var out []int64
	for w, t := range s.told {
		if w != except && t.owner == owner {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// rangeCap is what a claim records of this process's largest range.
func (s *Leases) rangeCap() int64 {
	if s.g == nil {
		return 0
	}
	return s.g.cfg.RangeCap
}

// begin is the start of a checked lease transaction: it reads and checks
// the identity with g, and returns the floor the last fence set (0 if
// none). Without a Guard it does nothing.
func (s *Leases) begin(ctx context.Context, q Querier, snap fence.Memory) (*reading, int64, error) {
	if s.g == nil {
		return nil, 0, nil
	}
	r, err := s.g.read(ctx, q, snap)
	if err != nil {
		return nil, 0, err
	}
	return r, r.rec.FenceUntil, nil
}

var _ snowflake.RangeClaimer = (*Leases)(nil)

// Claim implements snowflake.LeaseStore.
func (s *Leases) Claim(ctx context.Context, owner string, now time.Time, ttl time.Duration, maxWorkers int64) (snowflake.Lease, error) {
	return s.ClaimRange(ctx, owner, now, ttl, 0, maxWorkers)
}

// ClaimRange implements snowflake.RangeClaimer: Claim confined to worker
// IDs from..to-1.
func (s *Leases) ClaimRange(ctx context.Context, owner string, now time.Time, ttl time.Duration, from, to int64) (snowflake.Lease, error) {
	return s.claimRange(ctx, owner, now, ttl, from, to, nil)
}

// claimRange is ClaimRange, admitting the claim against the table's
// layouts first if layout is not nil (see ClaimLayout).
func (s *Leases) claimRange(ctx context.Context, owner string, now time.Time, ttl time.Duration, from, to int64, layout *snowflake.Layout) (snowflake.Lease, error) {
	if err := snowflake.CheckClaim(owner, ttl, to-from); err != nil {
		return snowflake.Lease{}, err
	}
	if from < 0 {
		return snowflake.Lease{}, fmt.Errorf("store: claim a worker ID: the range starts at %d, below 0", from)
	}
	minID, maxID := from, min(to-1, maxWorkerID)
	nowMs := now.UnixMilli()
	var lease snowflake.Lease
	// The anchor is retried with the claim: on Galera a claim on another
	// node that writes record 0 aborts it as it aborts the claim.
	err := retry(ctx, s.d, &s.retryHook, "claim", func() error {
		if err := s.anchorLayout(ctx, layout); err != nil {
			return err
		}
		for {
			l, found, err := s.claimFree(ctx, owner, nowMs, ttl, minID, maxID, layout)
			if err != nil || found {
				lease = l
				return err
			}
			seeded, err := s.seed(ctx, minID, maxID)
			if err != nil {
				return err
			}
			if !seeded {
				return fmt.Errorf("%w: all %d worker IDs from %d to %d are leased", snowflake.ErrNoFreeWorker, maxID-minID+1, minID, maxID)
			}
		}
	})
	if err != nil {
		if errors.Is(err, snowflake.ErrNoFreeWorker) {
			return snowflake.Lease{}, err
		}
		return snowflake.Lease{}, fmt.Errorf("store: claim a worker ID: %w", err)
	}
	return lease, nil
}

// claimFree takes the lowest free existing row, if there is one.
func (s *Leases) claimFree(ctx context.Context, owner string, nowMs int64, ttl time.Duration, minID, maxID int64, layout *snowflake.Layout) (snowflake.Lease, bool, error) {
	var lease snowflake.Lease
	found := false
	var gen int64
	err := s.inTx(ctx, func(q Querier, fenced int64, c checkIn) error {
		found = false
		layoutFloor, err := s.admitLayout(ctx, q, layout, snowflake.WorkerRange{From: minID, To: maxID + 1})
		if err != nil {
			return err
		}
		// The told rows first, then the free row (never waited for:
		// its select skips locked rows).
		if err := c.others(ctx, q, s, owner, -1, all); err != nil {
			return err
		}
		if err := s.takeFree(ctx, q, owner, nowMs, ttl, minID, maxID, max(fenced, layoutFloor), nowMs >= fenced, &lease, &found); err != nil || !found {
			return err
		}
		gen = c.gen
		return c.own(ctx, q, lease.WorkerID, owner)
	})
	if err == nil && found {
		s.setTold(lease.WorkerID, told{owner: owner, expires: snowflake.LeaseMillis(lease.ExpiresAt), gen: gen})
	}
	return lease, found, err
}

// takeFree takes the lowest free row; holdOver says whether the last
// fence's hold has ended, before which the lapsed leases it counted are
// not free (fence.Claimable).
func (s *Leases) takeFree(ctx context.Context, q Querier, owner string, nowMs int64, ttl time.Duration, minID, maxID, fenced int64, holdOver bool, lease *snowflake.Lease, found *bool) error {
	over := 0
	if holdOver {
		over = 1
	}
	var id, expires, last int64
	err := q.QueryRow(ctx, s.d.WorkerSelectFree, minID, maxID, nowMs, over, owner).Scan(&id, &expires, &last)
	if errors.Is(err, s.d.NoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	// The old holder may have issued IDs up to its expiry after its
	// last renewal; a released row has expiry 0. A fence's hold
	// covers holders the store lost all trace of.
	floor := max(last, expires, fenced)
	newExpiry := nowMs + ttl.Milliseconds()
	n, err := q.Exec(ctx, s.d.WorkerTake, owner, newExpiry, floor, 0, s.rangeCap(), id)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("worker %d changed under its row lock (%d rows updated)", id, n)
	}
	*lease = snowflake.Lease{WorkerID: id, Owner: owner, ExpiresAt: snowflake.LeaseTime(newExpiry), LastTimestamp: snowflake.LeaseTime(floor)}
	*found = true
	return nil
}

// ClaimStatic implements snowflake.StaticLeaseStore: it takes the row of
// workerID, creating it if needed, unless another owner's lease on it is
// live, and pins it, so that leased claims never take it.
func (s *Leases) ClaimStatic(ctx context.Context, owner string, workerID int64, now time.Time, ttl time.Duration) (snowflake.Lease, error) {
	return s.claimStatic(ctx, owner, workerID, now, ttl, nil)
}

// claimStatic is ClaimStatic, admitting the claim against the table's
// layouts first if layout is not nil (see ClaimLayout).
func (s *Leases) claimStatic(ctx context.Context, owner string, workerID int64, now time.Time, ttl time.Duration, layout *snowflake.Layout) (snowflake.Lease, error) {
	if workerID < 0 || workerID > maxWorkerID {
		return snowflake.Lease{}, fmt.Errorf("%w: worker ID %d is not in 0..%d", snowflake.ErrInvalidWorkerID, workerID, maxWorkerID)
	}
	if err := snowflake.CheckClaim(owner, ttl, workerID+1); err != nil {
		return snowflake.Lease{}, err
	}
	nowMs := now.UnixMilli()
	var lease snowflake.Lease
	var gen int64
	// Retried like Claim: on Galera a static claim and a renewal on
	// another node abort each other at COMMIT just as two claims do, and
	// every admission (and the anchor) writes the layout's record 0, which
	// a claim on another node may write too. Lock order: the fence row
	// (inTx), record 0 (admitLayout), then the worker row.
	err := retry(ctx, s.d, &s.retryHook, "claim", func() error {
		if err := s.anchorLayout(ctx, layout); err != nil {
			return err
		}
		if _, err := s.db.Exec(ctx, s.d.seedWorkers(workerID, workerID)); err != nil {
			return err
		}
		return s.inTx(ctx, func(q Querier, fenced int64, c checkIn) error {
			layoutFloor, err := s.admitLayout(ctx, q, layout, snowflake.WorkerRange{From: workerID, To: workerID + 1})
			if err != nil {
				return err
			}
			// The told rows below it first (see others).
			if err := c.others(ctx, q, s, owner, workerID, func(w int64) bool { return w < workerID }); err != nil {
				return err
			}
			if err := s.takeStatic(ctx, q, owner, workerID, nowMs, ttl, fenced, max(fenced, layoutFloor), &lease); err != nil {
				return err
			}
			gen = c.gen
			if err := c.own(ctx, q, workerID, owner); err != nil {
				return err
			}
			return c.others(ctx, q, s, owner, workerID, func(w int64) bool { return w > workerID })
		})
	})
	if err != nil {
		return snowflake.Lease{}, fmt.Errorf("store: claim worker %d: %w", workerID, err)
	}
	s.setTold(workerID, told{owner: owner, expires: snowflake.LeaseMillis(lease.ExpiresAt), gen: gen})
	return lease, nil
}

// takeStatic takes workerID's row. A lapsed lease that the last fence
// (whose hold ends at holdUntil) counted stays its owner's until the hold
// is over, as for leased claims (fence.Claimable): a static worker ID is
// no way around the hold.
func (s *Leases) takeStatic(ctx context.Context, q Querier, owner string, workerID, nowMs int64, ttl time.Duration, holdUntil, fenced int64, lease *snowflake.Lease) error {
	var holder string
	var expires, last, seen int64
	if err := q.QueryRow(ctx, s.d.WorkerSelectOne, workerID).Scan(&holder, &expires, &last, &seen); err != nil {
		return err
	}
	w := fence.Worker{Owned: holder != "", Expires: expires, Seen: seen}
	if plant.On("F12") {
		w.Seen = 0 // the hold ignored, as before: lapsed is free
	}
	if !fence.Claimable(fence.Record{FenceUntil: holdUntil}, time.UnixMilli(nowMs), w, holder == owner) {
		until := max(expires, holdUntil)
		return fmt.Errorf("%w: worker %d is held by %q until %s; stop that instance or pick another --worker-id",
			snowflake.ErrNoFreeWorker, workerID, holder, snowflake.LeaseTime(until).Format(time.RFC3339Nano))
	}
	floor := max(last, expires, fenced)
	newExpiry := nowMs + ttl.Milliseconds()
	if _, err := q.Exec(ctx, s.d.WorkerTake, owner, newExpiry, floor, 1, s.rangeCap(), workerID); err != nil {
		return err
	}
	*lease = snowflake.Lease{WorkerID: workerID, Owner: owner, ExpiresAt: snowflake.LeaseTime(newExpiry), LastTimestamp: snowflake.LeaseTime(floor)}
	return nil
}

// Unpin implements snowflake.StaticLeaseStore.
func (s *Leases) Unpin(ctx context.Context, workerID int64) error {
	if _, err := s.db.Exec(ctx, s.d.WorkerUnpin, workerID); err != nil {
		return fmt.Errorf("store: unpin worker %d: %w", workerID, err)
	}
	return nil
}

// seed inserts free rows for the lowest missing worker IDs from minID
// to maxID. It reports false if none are missing.
func (s *Leases) seed(ctx context.Context, minID, maxID int64) (bool, error) {
	var lo int64
	if err := s.db.QueryRow(ctx, s.d.WorkerLowestMissing, minID, minID, maxID, maxID).Scan(&lo); err != nil {
		return false, err
	}
	if lo < minID || lo > maxID {
		return false, nil
	}
	_, err := s.db.Exec(ctx, s.d.seedWorkers(lo, min(lo+seedBatch-1, maxID)))
	return err == nil, err
}

// Renew implements snowflake.LeaseStore with a compare-and-set on the
// worker ID, the owner and the expiry.
func (s *Leases) Renew(ctx context.Context, lease snowflake.Lease, now, lastTimestamp time.Time, ttl time.Duration) (snowflake.Lease, error) {
	if lease.Owner == "" {
		return snowflake.Lease{}, errLost(lease)
	}
	newExpiry := now.UnixMilli() + ttl.Milliseconds()
	var n int64
	var err error
	if s.g == nil {
		n, err = s.db.Exec(ctx, s.d.WorkerRenew, newExpiry, snowflake.LeaseMillis(lastTimestamp), lease.WorkerID, lease.Owner, now.UnixMilli())
	} else {
		var gen int64
		w := lease.WorkerID
		// Retried like claims: a renewal can meet a claim or a fence of
		// another process in a deadlock too.
		err = retry(ctx, s.d, &s.retryHook, "renew", func() error {
			return s.inTx(ctx, func(q Querier, _ int64, c checkIn) error {
				if err := c.others(ctx, q, s, lease.Owner, w, func(o int64) bool { return o < w }); err != nil {
					return err
				}
				var err error
				if n, err = q.Exec(ctx, s.d.WorkerRenew, newExpiry, snowflake.LeaseMillis(lastTimestamp), w, lease.Owner, now.UnixMilli()); err != nil {
					return err
				}
				if n == 0 {
					return s.wentBack(ctx, q, lease, now, c.gen)
				}
				gen = c.gen
				if err := c.own(ctx, q, w, lease.Owner); err != nil {
					return err
				}
				return c.others(ctx, q, s, lease.Owner, w, func(o int64) bool { return o > w })
			})
		})
		if err == nil && n > 0 {
			expires := newExpiry
			if t, ok := s.toldOf(lease.WorkerID, lease.Owner); ok {
				expires = max(expires, t.expires)
			}
			s.setTold(lease.WorkerID, told{owner: lease.Owner, expires: expires, gen: gen})
		}
	}
	if err != nil {
		return snowflake.Lease{}, fmt.Errorf("store: renew the lease on worker %d: %w", lease.WorkerID, err)
	}
	if n == 0 {
		return snowflake.Lease{}, errLost(lease)
	}
	// The store kept the later of the two expiries; the holder's deadline
	// must not pass what the store holds, so it takes the later only if
	// it is the new one.
	lease.ExpiresAt = maxTime(lease.ExpiresAt, snowflake.LeaseTime(newExpiry))
	if lastTimestamp.After(lease.LastTimestamp) {
		lease.LastTimestamp = snowflake.LeaseTime(snowflake.LeaseMillis(lastTimestamp))
	}
	return lease, nil
}

// wentBack is what a renewal that matched no row makes of it: lapsed, or
// taken by another owner after it lapsed, is the holder's own affair
// (errLost follows); but gone, or older than the holder was told, while
// the holder's expiry has not yet passed and no fence was recorded since
// it was told, is a store that went back (a restore, a node bootstrapped
// from a lagging copy) without its identity saying so: then the store
// fences (*errFence), before anything else is reserved or claimed.
func (s *Leases) wentBack(ctx context.Context, q Querier, lease snowflake.Lease, now time.Time, gen int64) error {
	t, ok := s.toldOf(lease.WorkerID, lease.Owner)
	if !ok || t.gen != gen || now.UnixMilli()+s.g.config().LeaseMargin.Milliseconds() >= t.expires {
		return nil
	}
	var holder string
	var expires, last, seen int64
	err := q.QueryRow(ctx, s.d.WorkerSelectOne, lease.WorkerID).Scan(&holder, &expires, &last, &seen)
	switch {
	case errors.Is(err, s.d.NoRows):
		return &errFence{d: fence.Decision{Verdict: fence.Fence, Reason: fmt.Sprintf("the lease on worker %d is gone before its expiry", lease.WorkerID)}, force: true, still: s.noFenceSince(t.gen)}
	case err != nil:
		return err
	case last >= t.expires:
		// Taken over or disowned after the expiry the holder was told,
		// by the clock of whoever did it (a claim starts at the old
		// expiry, a relayout raises the floor to it): the holder's own
		// lapse, also when its renewal ran late, not a store that went
		// back.
		return nil
	case holder != lease.Owner || expires < t.expires:
		return &errFence{d: fence.Decision{Verdict: fence.Fence, Reason: fmt.Sprintf("the lease on worker %d went back before its expiry (owner %q, expiry %d; was told %d)",
			lease.WorkerID, holder, expires, t.expires)}, force: true, still: s.noFenceSince(t.gen)}
	}
	return nil
}

// noFenceSince is the evidence check of a lease told at generation gen:
// it stands while the record is still the one the holder was told, and
// a fence recorded since (which held or raised the leases it found) has
// dealt with it.
func (s *Leases) noFenceSince(gen int64) func(ctx context.Context, q Querier) (bool, error) {
	return func(ctx context.Context, q Querier) (bool, error) {
		r, err := s.g.readAll(ctx, q)
		if err != nil {
			return false, err
		}
		return r.rec.Generation <= gen, nil
	}
}

// Release implements snowflake.LeaseStore. It clears the owner and the
// expiry, so the next claim's floor is lastTimestamp alone.
func (s *Leases) Release(ctx context.Context, lease snowflake.Lease, lastTimestamp time.Time) error {
	if lease.Owner == "" {
		return errLost(lease)
	}
	// A checked transaction, as a renewal is: a release after a fence
	// this process has not witnessed raises what it reserved first (a
	// graceful shutdown during the hold must not end the hold's wait for
	// it before its witness raise), and a release on a server whose
	// history changed fences before it writes.
	var n int64
	err := retry(ctx, s.d, &s.retryHook, "release", func() error {
		if plant.On("F5") {
			var err error
			n, err = s.db.Exec(ctx, s.d.WorkerRelease, snowflake.LeaseMillis(lastTimestamp), lease.WorkerID, lease.Owner)
			return err
		}
		return s.inTx(ctx, func(q Querier, _ int64, _ checkIn) error {
			var err error
			n, err = q.Exec(ctx, s.d.WorkerRelease, snowflake.LeaseMillis(lastTimestamp), lease.WorkerID, lease.Owner)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("store: release the lease on worker %d: %w", lease.WorkerID, err)
	}
	if _, ok := s.toldOf(lease.WorkerID, lease.Owner); ok && n > 0 {
		s.forget(lease.WorkerID)
	}
	if n == 0 {
		return errLost(lease)
	}
	return nil
}

// Workers returns every row of worker_node, free or leased, ordered by
// worker ID, for monitoring. A free row has no Owner; a lease whose
// ExpiresAt has passed is free to claim too.
func (s *Leases) Workers(ctx context.Context) ([]snowflake.Lease, error) {
	rows, err := s.db.Query(ctx, s.d.WorkerList)
	if err != nil {
		return nil, fmt.Errorf("store: list worker leases: %w", err)
	}
	defer rows.Close()
	var out []snowflake.Lease
	for rows.Next() {
		var l snowflake.Lease
		var expires, last int64
		if err := rows.Scan(&l.WorkerID, &l.Owner, &expires, &last); err != nil {
			return nil, fmt.Errorf("store: list worker leases: %w", err)
		}
		l.ExpiresAt, l.LastTimestamp = snowflake.LeaseTime(expires), snowflake.LeaseTime(last)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list worker leases: %w", err)
	}
	return out, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func errLost(l snowflake.Lease) error {
	return fmt.Errorf("%w: worker %d is not held by %q any more (expired, taken over or released)", snowflake.ErrLeaseLost, l.WorkerID, l.Owner)
}
