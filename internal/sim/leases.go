package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/fence"
)

// The lease table: sqlstore.Leases on the simulated database. Claims and
// renewals are checked transactions (db.checked, which fences first when
// the history changed), and a claim starts its IDs at the last fence's
// hold (Record.FenceUntil), as sqlstore's takeFree does. Calls run on
// the simulator's goroutine: heartbeats do (RenewInterval < 0), and so do
// claims and Close.

type leaseTable struct{ db *db }

// lease is a row as a snowflake.Lease.
func (wk worker) lease(id int64) snowflake.Lease {
	return snowflake.Lease{WorkerID: id, Owner: wk.owner, ExpiresAt: snowflake.LeaseTime(wk.expires), LastTimestamp: snowflake.LeaseTime(wk.last)}
}

// claim takes the lowest free worker ID of from..to-1 for p (mu held).
func (t *leaseTable) claim(p *proc, owner string, now time.Time, ttl time.Duration, from, to int64) (snowflake.Lease, func(), error) {
	if err := snowflake.CheckClaim(owner, ttl, to-from); err != nil {
		return snowflake.Lease{}, nil, err
	}
	rd, err := t.db.checked(p, false, nil)
	if err != nil {
		return snowflake.Lease{}, nil, err
	}
	rec := rd.Rec
	nowMs := now.UnixMilli()
	for id := from; id < to; id++ {
		wk := t.db.workers[id]
		if !fence.Claimable(rec, now, fence.Worker{Owned: wk.owner != "", Expires: wk.expires, Seen: wk.seen}, wk.owner == owner) || wk.pinned {
			continue
		}
		wk = worker{owner: owner, expires: nowMs + ttl.Milliseconds(), last: max(wk.last, wk.expires, rec.FenceUntil), seen: rec.Generation, rangeCap: p.fenceCfg.RangeCap}
		t.db.workers[id] = wk
		t.checkIn(owner, rec.Generation)
		t.db.by = commitClaim
		t.db.commit()
		return wk.lease(id), t.told(p, rd, id), nil
	}
	t.db.commitIfDirty()
	return snowflake.Lease{}, nil, fmt.Errorf("%w: all %d worker IDs from %d are leased", snowflake.ErrNoFreeWorker, to-from, from)
}

func (t *leaseTable) claimStatic(p *proc, owner string, id int64, now time.Time, ttl time.Duration) (snowflake.Lease, func(), error) {
	if err := snowflake.CheckClaim(owner, ttl, id+1); err != nil {
		return snowflake.Lease{}, nil, err
	}
	rd, err := t.db.checked(p, false, nil)
	if err != nil {
		return snowflake.Lease{}, nil, err
	}
	rec := rd.Rec
	nowMs := now.UnixMilli()
	wk := t.db.workers[id]
	if wk.owner != "" && wk.owner != owner && wk.expires > nowMs {
		t.db.commitIfDirty()
		return snowflake.Lease{}, nil, fmt.Errorf("%w: worker %d is held by %q", snowflake.ErrNoFreeWorker, id, wk.owner)
	}
	wk = worker{owner: owner, expires: nowMs + ttl.Milliseconds(), last: max(wk.last, wk.expires, rec.FenceUntil), pinned: true, seen: rec.Generation, rangeCap: p.fenceCfg.RangeCap}
	t.db.workers[id] = wk
	t.checkIn(owner, rec.Generation)
	t.db.by = commitClaim
	t.db.commit()
	return wk.lease(id), t.told(p, rd, id), nil
}

func (t *leaseTable) renew(p *proc, lease snowflake.Lease, now, last time.Time, ttl time.Duration) (snowflake.Lease, func(), error) {
	for fences := 0; ; fences++ {
		save, snap := t.db.snap(), p.mem
		rd, err := t.db.checked(p, false, nil)
		if err != nil {
			t.db.rollback(save)
			return snowflake.Lease{}, nil, err
		}
		wk, ok := t.db.workers[lease.WorkerID]
		if !ok || lease.Owner == "" || wk.owner != lease.Owner || wk.expires <= now.UnixMilli() {
			if d := t.wentBack(p, lease, now, rd.Rec.Generation); d != nil && fences < maxFences {
				t.db.rollback(save)
				t.db.w.res.RegressionFences++
				t.db.fence(p, snap, d)
				continue
			}
			t.db.commitIfDirty()
			return snowflake.Lease{}, t.observer(p, rd), fmt.Errorf("%w: worker %d is no longer held by %q", snowflake.ErrLeaseLost, lease.WorkerID, lease.Owner)
		}
		return t.renewed(p, lease, wk, rd, now, last, ttl)
	}
}

// wentBack is sqlstore's Leases.wentBack: a renewal that finds its lease
// gone, or older than it was told, with no fence since it was told and
// before the expiry it was told, is evidence that the store went back
// (mu held). PlantNoRegression ignores it.
func (t *leaseTable) wentBack(p *proc, lease snowflake.Lease, now time.Time, gen int64) *fence.Decision {
	told, ok := p.told[lease.WorkerID]
	if t.db.w.cfg.Plant == PlantNoRegression || !ok || told != gen || now.UnixMilli()+p.fenceCfg.LeaseMargin.Milliseconds() >= snowflake.LeaseMillis(lease.ExpiresAt) {
		return nil
	}
	wk, ok := t.db.workers[lease.WorkerID]
	if !ok || wk.owner != lease.Owner || wk.expires < snowflake.LeaseMillis(lease.ExpiresAt) {
		return &fence.Decision{Verdict: fence.Fence, Reason: fmt.Sprintf("the lease on worker %d went back before its expiry", lease.WorkerID)}
	}
	return nil
}

// checkIn is the check-in of every lease of owner against gen
// (worker_node.seen_generation, sqlstore's CheckedIn), mu held.
func (t *leaseTable) checkIn(owner string, gen int64) {
	for id, wk := range t.db.workers {
		if wk.owner == owner && wk.seen < gen {
			wk.seen = gen
			t.db.workers[id] = wk
		}
	}
}

func (t *leaseTable) renewed(p *proc, lease snowflake.Lease, wk worker, rd fence.Reading, now, last time.Time, ttl time.Duration) (snowflake.Lease, func(), error) {
	wk.expires = max(wk.expires, now.UnixMilli()+ttl.Milliseconds())
	wk.last = max(wk.last, snowflake.LeaseMillis(last))
	t.db.workers[lease.WorkerID] = wk
	t.checkIn(lease.Owner, rd.Rec.Generation)
	t.db.by, t.db.byInc = commitRenew, p.inc
	t.db.commit()

	// The holder's deadline must not pass the stored expiry, and it only
	// learns a later one if it asked for it.
	out := wk.lease(lease.WorkerID)
	out.ExpiresAt = snowflake.LeaseTime(max(snowflake.LeaseMillis(lease.ExpiresAt), now.UnixMilli()+ttl.Milliseconds()))
	return out, t.told(p, rd, lease.WorkerID), nil
}

func (t *leaseTable) release(lease snowflake.Lease, last time.Time) error {
	wk, ok := t.db.workers[lease.WorkerID]
	if !ok || lease.Owner == "" || wk.owner != lease.Owner {
		return fmt.Errorf("%w: worker %d is no longer held by %q", snowflake.ErrLeaseLost, lease.WorkerID, lease.Owner)
	}
	t.db.workers[lease.WorkerID] = worker{last: max(wk.last, snowflake.LeaseMillis(last)), pinned: wk.pinned}
	t.db.commit()
	return nil
}

// Unpin implements snowflake.StaticLeaseStore's Unpin, for the operator.
func (t *leaseTable) Unpin(_ context.Context, id int64) error {
	t.db.mu.Lock()
	defer t.db.mu.Unlock()
	if wk, ok := t.db.workers[id]; ok {
		wk.pinned = false
		t.db.workers[id] = wk
		t.db.commit()
	}
	return nil
}

// observer returns what p remembers once it gets the answer.
func (t *leaseTable) observer(p *proc, rd fence.Reading) func() {
	return func() { t.db.observe(p, rd) }
}

// told is observer for a claim or renewal of worker id that committed:
// the holder also remembers the generation it was told (sqlstore's
// Leases.setTold), once the answer arrives.
func (t *leaseTable) told(p *proc, rd fence.Reading, id int64) func() {
	return func() {
		t.db.observe(p, rd)
		p.told[id] = rd.Rec.Generation
	}
}

// holders returns the owner of every worker ID.
func (t *leaseTable) holders() map[int64]string {
	t.db.mu.Lock()
	defer t.db.mu.Unlock()
	out := map[int64]string{}
	for id, wk := range t.db.workers {
		out[id] = wk.owner
	}
	return out
}

// leases is one process's handle on the lease table, failing now and then
// before or after the change (a lost acknowledgement), as the simulation
// picks. It implements snowflake.StaticLeaseStore and RangeClaimer.
type leases struct {
	w *world
	p *proc
}

var (
	_ snowflake.StaticLeaseStore = leases{}
	_ snowflake.RangeClaimer     = leases{}
)

// do runs a call under the table's mutex with a fault or without; seen,
// if the call returns one, is run only when the answer arrives.
func (l leases) do(apply func() (func(), error)) error {
	w := l.w
	w.db.mu.Lock()
	defer w.db.mu.Unlock()
	fault := 0
	if w.faults && !w.cfg.SteadyLeases {
		switch r := w.pick(100); {
		case r < 8:
			return errInjected
		case r < 14:
			fault = 2
		}
	}
	seen, err := apply()
	if fault == 2 {
		return fmt.Errorf("%w after commit", errInjected)
	}
	if seen != nil {
		seen()
	}
	return err
}

func (l leases) Claim(ctx context.Context, owner string, now time.Time, ttl time.Duration, maxWorkers int64) (snowflake.Lease, error) {
	return l.ClaimRange(ctx, owner, now, ttl, 0, maxWorkers)
}

func (l leases) ClaimRange(_ context.Context, owner string, now time.Time, ttl time.Duration, from, to int64) (out snowflake.Lease, err error) {
	err = l.do(func() (seen func(), err error) {
		out, seen, err = l.w.db.leases.claim(l.p, owner, now, ttl, from, min(to, math.MaxInt32+1))
		return seen, err
	})
	return out, err
}

func (l leases) ClaimStatic(_ context.Context, owner string, id int64, now time.Time, ttl time.Duration) (out snowflake.Lease, err error) {
	err = l.do(func() (seen func(), err error) {
		out, seen, err = l.w.db.leases.claimStatic(l.p, owner, id, now, ttl)
		return seen, err
	})
	return out, err
}

func (l leases) Renew(_ context.Context, lease snowflake.Lease, now, last time.Time, ttl time.Duration) (out snowflake.Lease, err error) {
	err = l.do(func() (seen func(), err error) {
		out, seen, err = l.w.db.leases.renew(l.p, lease, now, last, ttl)
		return seen, err
	})
	return out, err
}

func (l leases) Release(_ context.Context, lease snowflake.Lease, last time.Time) error {
	return l.do(func() (func(), error) { return nil, l.w.db.leases.release(lease, last) })
}

func (l leases) Unpin(ctx context.Context, id int64) error { return l.w.db.leases.Unpin(ctx, id) }

// leasedConfig: 4 worker IDs for 3 or more processes, so that takeovers
// are frequent. Process 0 pins worker 3 while static; process 1 claims
// only from 1..3 (WorkerRange, through ClaimRange).
func (w *world) leasedConfig(p *proc) snowflake.LeasedConfig {
	cfg := snowflake.LeasedConfig{
		Owner: p.owner, TTL: leaseTTL, RenewInterval: -1, Margin: leaseTTL / 10,
		Generator: snowflake.Config{Epoch: w.start.Add(-24 * time.Hour).Truncate(time.Millisecond), TimeBits: 41, WorkerBits: 2, SequenceBits: 20, Clock: procClock{p}},
	}
	switch {
	case p.static:
		cfg.Static, cfg.Generator.WorkerID = true, staticID
	case p.id == 1:
		cfg.WorkerRange = snowflake.WorkerRange{From: 1, To: 4}
	}
	return cfg
}

// presenceFrom is the first worker ID of presence leases, as
// sqlstore.PresenceFrom: above every ID a snowflake layout uses.
const presenceFrom = 1 << 29

// presenceRows is how many presence rows there are: every process holds
// one, and a fence's marked rows of processes gone since stay taken
// until its hold ends (fence.Claimable). The store has 2^29.
const presenceRows = 64

func (w *world) claim(p *proc) {
	switch p.lease {
	case leaseNone:
		return
	case leasePresence:
		w.presenceClaim(p)
		return
	}
	// Beside its worker lease a serve process holds a presence lease
	// under the same owner: it stays counted, and waited for, while every
	// worker ID is taken (a fence's marked leases are not claimable until
	// its hold ends: fence.Claimable). presenceRenew claims one if none
	// is held.
	w.presenceRenew(p)
	before := w.db.leases.holders()
	g, err := snowflake.NewLeased(context.Background(), leases{w: w, p: p}, w.leasedConfig(p))
	w.trace("  claim %d.%d: %v", p.id, p.inc, err)
	if err == nil {
		p.gen = g
		w.countTakeover(before, g.WorkerID())
	}
}

func (w *world) countTakeover(before map[int64]string, id int64) {
	if o, ok := before[id]; ok && o != "" {
		w.res.Takeovers++
	}
}

// presenceClaim claims a presence lease for p, as store.Presence does
// at start and after a lease it finds lost. PlantNoPresence claims none.
func (w *world) presenceClaim(p *proc) {
	if w.cfg.Plant == PlantNoPresence {
		return
	}
	l, err := leases{w: w, p: p}.ClaimRange(context.Background(), p.owner, p.wall(), leaseTTL, presenceFrom, presenceFrom+presenceRows)
	w.trace("  presence claim %d.%d: %d %v", p.id, p.inc, l.WorkerID, err)
	if err == nil {
		p.presence = l
	}
}

// presenceRenew is store.Presence's renewal: its check-in.
func (w *world) presenceRenew(p *proc) {
	if p.presence.Owner == "" {
		w.presenceClaim(p)
		return
	}
	now := p.wall()
	l, err := leases{w: w, p: p}.Renew(context.Background(), p.presence, now, now, leaseTTL)
	w.trace("  presence renew %d.%d: %d %v", p.id, p.inc, p.presence.WorkerID, err)
	switch {
	case errors.Is(err, snowflake.ErrLeaseLost):
		p.presence = snowflake.Lease{}
		w.presenceClaim(p)
	case err == nil:
		p.presence = l
	}
}

func (w *world) heartbeat(p *proc) {
	switch p.lease {
	case leaseNone:
		return
	case leasePresence:
		w.presenceRenew(p)
		return
	}
	if p.gen == nil {
		w.claim(p)
		return
	}
	w.presenceRenew(p)
	before := w.db.leases.holders()
	held := p.gen.WorkerID()
	err := p.gen.Heartbeat(context.Background())
	w.trace("  heartbeat %d.%d: worker %d, %v", p.id, p.inc, p.gen.WorkerID(), err)
	if err == nil && held < 0 {
		w.countTakeover(before, p.gen.WorkerID())
	}
}
