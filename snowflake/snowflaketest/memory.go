// Package snowflaketest helps test worker-lease stores and the code that
// uses them: Memory is an in-memory snowflake.LeaseStore that can be
// made to fail on demand, Clock is a fake snowflake.Clock, and
// RunLeaseStore is the conformance suite every LeaseStore backend must
// pass, from single calls to Leased generators taking over each other's
// worker IDs.
package snowflaketest

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idgen/idgen/snowflake"
)

// Memory is an in-memory snowflake.LeaseStore for tests, and the
// reference for what the SQL stores do. It is safe for concurrent use. The
// zero value is not usable; call NewMemory.
type Memory struct {
	mu      sync.Mutex
	rows    map[int64]memRow
	layouts []snowflake.LayoutRecord

	fail atomic.Pointer[error]
}

// memRow is one row of the worker_node table, times in Unix milliseconds.
type memRow struct {
	owner         string
	expires, last int64
	pinned        bool
}

// NewMemory returns a Memory with no leases.
func NewMemory() *Memory { return &Memory{rows: make(map[int64]memRow)} }

// SetError makes every later call fail with err; nil heals the store.
func (m *Memory) SetError(err error) {
	if err == nil {
		m.fail.Store(nil)
		return
	}
	m.fail.Store(&err)
}

func (m *Memory) failure() error {
	if p := m.fail.Load(); p != nil {
		return *p
	}
	return nil
}

// Claim implements snowflake.LeaseStore.
func (m *Memory) Claim(ctx context.Context, owner string, now time.Time, ttl time.Duration, maxWorkers int64) (snowflake.Lease, error) {
	return m.claim(ctx, owner, now, ttl, 0, maxWorkers, nil)
}

// ClaimRange implements snowflake.RangeClaimer.
func (m *Memory) ClaimRange(ctx context.Context, owner string, now time.Time, ttl time.Duration, from, to int64) (snowflake.Lease, error) {
	return m.claim(ctx, owner, now, ttl, from, to, nil)
}

// ClaimLayout implements snowflake.LayoutClaimer, as the SQL stores do:
// the claim is admitted against the layout records (snowflake.AdmitLayout)
// and recorded under the same lock as the lease.
func (m *Memory) ClaimLayout(ctx context.Context, owner string, now time.Time, ttl time.Duration, layout snowflake.Layout, workers snowflake.WorkerRange, static int64) (snowflake.Lease, error) {
	if static >= 0 {
		return m.claimStatic(ctx, owner, static, now, ttl, &layout)
	}
	return m.claim(ctx, owner, now, ttl, workers.From, workers.To, &layout)
}

func (m *Memory) claim(ctx context.Context, owner string, now time.Time, ttl time.Duration, from, to int64, layout *snowflake.Layout) (snowflake.Lease, error) {
	if err := snowflake.CheckClaim(owner, ttl, to-from); err != nil {
		return snowflake.Lease{}, err
	}
	if from < 0 {
		return snowflake.Lease{}, fmt.Errorf("snowflaketest: claim a worker ID: the range starts at %d, below 0", from)
	}
	if err := m.failure(); err != nil {
		return snowflake.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return snowflake.Lease{}, err
	}
	nowMs := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	layoutFloor, err := m.admitLayout(layout, snowflake.WorkerRange{From: from, To: min(to, math.MaxInt32+1)})
	if err != nil {
		return snowflake.Lease{}, err
	}
	// A missing row is free, so the loop ends by len(m.rows).
	for id := from; id < min(to, math.MaxInt32+1); id++ {
		r := m.rows[id]
		if (r.owner != "" && r.expires > nowMs) || r.pinned {
			continue
		}
		r = memRow{owner: owner, expires: nowMs + ttl.Milliseconds(), last: max(r.last, r.expires, layoutFloor)}
		m.rows[id] = r
		return r.lease(id), nil
	}
	return snowflake.Lease{}, fmt.Errorf("%w: all %d worker IDs from %d are leased", snowflake.ErrNoFreeWorker, to-from, from)
}

// admitLayout admits and records a claim in layout, if not nil, and
// returns its floor in Unix milliseconds. The caller holds mu.
func (m *Memory) admitLayout(layout *snowflake.Layout, workers snowflake.WorkerRange) (int64, error) {
	if layout == nil {
		return 0, nil
	}
	rec, at, err := snowflake.AdmitLayout(m.layouts, *layout, workers)
	if err != nil {
		return 0, err
	}
	if at == len(m.layouts) {
		m.layouts = append(m.layouts, rec)
	} else {
		m.layouts[at] = rec
	}
	return snowflake.LeaseMillis(rec.NotBefore), nil
}

// Layouts implements snowflake.LeaseTable.
func (m *Memory) Layouts(ctx context.Context) ([]snowflake.LayoutRecord, error) {
	if err := m.failure(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]snowflake.LayoutRecord(nil), m.layouts...), nil
}

// Relayout implements snowflake.LeaseTable, as the SQL stores do.
func (m *Memory) Relayout(ctx context.Context, to snowflake.Layout, now time.Time, maxWait time.Duration) (snowflake.LayoutRecord, error) {
	if err := m.failure(); err != nil {
		return snowflake.LayoutRecord{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var latest int64
	for id, r := range m.rows {
		if r.owner != "" && r.expires > now.UnixMilli() {
			return snowflake.LayoutRecord{}, fmt.Errorf("%w: worker %d is held by %q", snowflake.ErrLayoutInUse, id, r.owner)
		}
		latest = max(latest, r.last, r.expires)
	}
	planned, err := snowflake.PlanRelayout(m.layouts, snowflake.LeaseTime(latest), to, now, maxWait)
	if err != nil {
		return snowflake.LayoutRecord{}, err
	}
	for id, r := range m.rows {
		m.rows[id] = memRow{last: max(r.last, r.expires), pinned: r.pinned}
	}
	m.layouts = planned
	return planned[len(planned)-1], nil
}

// Renew implements snowflake.LeaseStore.
func (m *Memory) Renew(ctx context.Context, lease snowflake.Lease, now, lastTimestamp time.Time, ttl time.Duration) (snowflake.Lease, error) {
	if err := m.failure(); err != nil {
		return snowflake.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return snowflake.Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rows[lease.WorkerID]
	if !ok || lease.Owner == "" || r.owner != lease.Owner || r.expires <= now.UnixMilli() {
		return snowflake.Lease{}, fmt.Errorf("%w: worker %d is no longer held by %q", snowflake.ErrLeaseLost, lease.WorkerID, lease.Owner)
	}
	r.expires = max(r.expires, now.UnixMilli()+ttl.Milliseconds())
	r.last = max(r.last, snowflake.LeaseMillis(lastTimestamp))
	m.rows[lease.WorkerID] = r
	// Not r.lease: the holder's deadline must not pass the stored expiry,
	// and it only learns the later one if it asked for it.
	out := r.lease(lease.WorkerID)
	out.ExpiresAt = snowflake.LeaseTime(max(snowflake.LeaseMillis(lease.ExpiresAt), now.UnixMilli()+ttl.Milliseconds()))
	return out, nil
}

// Unpin implements snowflake.StaticLeaseStore.
func (m *Memory) Unpin(ctx context.Context, workerID int64) error {
	if err := m.failure(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.rows[workerID]; ok {
		r.pinned = false
		m.rows[workerID] = r
	}
	return nil
}

// ClaimStatic implements snowflake.StaticLeaseStore.
func (m *Memory) ClaimStatic(ctx context.Context, owner string, workerID int64, now time.Time, ttl time.Duration) (snowflake.Lease, error) {
	return m.claimStatic(ctx, owner, workerID, now, ttl, nil)
}

func (m *Memory) claimStatic(ctx context.Context, owner string, workerID int64, now time.Time, ttl time.Duration, layout *snowflake.Layout) (snowflake.Lease, error) {
	if workerID < 0 || workerID > math.MaxInt32 {
		return snowflake.Lease{}, fmt.Errorf("%w: %d", snowflake.ErrInvalidWorkerID, workerID)
	}
	if err := snowflake.CheckClaim(owner, ttl, workerID+1); err != nil {
		return snowflake.Lease{}, err
	}
	if err := m.failure(); err != nil {
		return snowflake.Lease{}, err
	}
	nowMs := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rows[workerID]
	if r.owner != "" && r.owner != owner && r.expires > nowMs {
		return snowflake.Lease{}, fmt.Errorf("%w: worker %d is held by %q", snowflake.ErrNoFreeWorker, workerID, r.owner)
	}
	layoutFloor, err := m.admitLayout(layout, snowflake.WorkerRange{From: workerID, To: workerID + 1})
	if err != nil {
		return snowflake.Lease{}, err
	}
	r = memRow{owner: owner, expires: nowMs + ttl.Milliseconds(), last: max(r.last, r.expires, layoutFloor), pinned: true}
	m.rows[workerID] = r
	return r.lease(workerID), nil
}

// Release implements snowflake.LeaseStore.
func (m *Memory) Release(ctx context.Context, lease snowflake.Lease, lastTimestamp time.Time) error {
	if err := m.failure(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rows[lease.WorkerID]
	if !ok || lease.Owner == "" || r.owner != lease.Owner {
		return fmt.Errorf("%w: worker %d is no longer held by %q", snowflake.ErrLeaseLost, lease.WorkerID, lease.Owner)
	}
	m.rows[lease.WorkerID] = memRow{last: max(r.last, snowflake.LeaseMillis(lastTimestamp)), pinned: r.pinned}
	return nil
}

// Workers returns every worker ID that has a row, ordered by worker ID,
// as the SQL stores' Workers does.
func (m *Memory) Workers(ctx context.Context) ([]snowflake.Lease, error) {
	if err := m.failure(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]snowflake.Lease, 0, len(m.rows))
	for id, r := range m.rows {
		out = append(out, r.lease(id))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].WorkerID < out[j].WorkerID })
	return out, nil
}

func (r memRow) lease(id int64) snowflake.Lease {
	return snowflake.Lease{WorkerID: id, Owner: r.owner, ExpiresAt: snowflake.LeaseTime(r.expires), LastTimestamp: snowflake.LeaseTime(r.last)}
}
