package snowflake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

var (
	// ErrLeaseLost is returned by LeaseStore.Renew and Release when the
	// lease has expired, has been claimed by another owner, or no longer
	// exists. The holder must stop issuing at once (Generator.Pause).
	ErrLeaseLost = errors.New("snowflake: worker lease lost")

	// ErrNoFreeWorker is returned by LeaseStore.Claim, and so by NewLeased,
	// when every worker ID in 0..maxWorkers-1 is held by an unexpired
	// lease.
	ErrNoFreeWorker = errors.New("snowflake: no free worker ID")
)

// Lease is one owner's hold on a worker ID until ExpiresAt.
type Lease struct {
	// WorkerID is the leased worker ID.
	WorkerID int64
	// Owner identifies the holding process, as given to Claim; Renew and
	// Release succeed only for the owner. It is empty for a worker ID that
	// is free (LeaseStore implementations that list their worker IDs
	// report free ones this way).
	Owner string
	// ExpiresAt is when the lease lapses unless renewed: the now passed to
	// Claim or Renew plus the TTL, on the holder's clock, in whole
	// milliseconds. The zero Time for a free worker ID.
	ExpiresAt time.Time
	// LastTimestamp is a time at or after every ID issued under this worker
	// ID so far, in whole milliseconds; the zero Time if there is none. A
	// new holder passes it as Config.NotBefore (or to Generator.Resume).
	LastTimestamp time.Time
}

// LeaseStore hands out worker IDs so that no two live processes share one.
// It is declared here, where it is used, and implemented over the database
// by package store (Store.Leases, for store/sqlite, store/postgres and
// store/mysql); snowflaketest.Memory is an in-memory one.
//
// Time comes from the caller, never from the store: every method that
// compares or sets an expiry takes now. All holders of a table must
// therefore have roughly synchronised clocks, but the uniqueness of IDs
// does not depend on how well (see the package documentation).
//
// Implementations must be safe for concurrent use across processes, and
// must keep this promise about LastTimestamp, on which the uniqueness of
// IDs across restarts and takeovers rests: the LastTimestamp Claim returns
// is at or after the millisecond of every ID issued under the worker ID
// before. Renew and Release record the holder's Generator.LastTimestamp,
// but a holder that crashes or is cut off may have issued IDs after its
// last renewal; so when Claim takes over a lease that expired rather than
// one that was released, it returns the later of the recorded
// LastTimestamp and the old lease's ExpiresAt. That is sound because the
// old holder stamps no ID at or after its lease deadline
// (Generator.SetDeadline) even if it never hears that the lease was lost.
//
// A holder uses it like this, as Leased does: Claim a lease and pass its
// WorkerID and LastTimestamp to New; renew well before ExpiresAt, each time
// calling SetDeadline with the expiry less a skew margin; on ErrLeaseLost
// or repeated failure call Pause; on shutdown call Pause, then Release with
// the then-final LastTimestamp.
type LeaseStore interface {
	// Claim leases to owner, until now+ttl, the lowest worker ID in
	// 0..maxWorkers-1 that is free: never leased, released, or expired at
	// now (ExpiresAt <= now). It returns ErrNoFreeWorker if there is none.
	// Concurrent claims, from any number of processes, never get the same
	// worker ID. owner must be 1 to 128 bytes and unique to the process.
	Claim(ctx context.Context, owner string, now time.Time, ttl time.Duration, maxWorkers int64) (Lease, error)

	// Renew extends lease to now+ttl and records lastTimestamp, never
	// moving the stored one backwards, if lease.Owner still holds
	// lease.WorkerID and the lease has not expired at now. It returns the
	// updated lease, or ErrLeaseLost.
	Renew(ctx context.Context, lease Lease, now, lastTimestamp time.Time, ttl time.Duration) (Lease, error)

	// Release records lastTimestamp and frees the worker ID for others at
	// once, if lease.Owner still holds it; otherwise it returns
	// ErrLeaseLost. The holder must have stopped issuing (Generator.Pause)
	// and pass its final LastTimestamp: the next Claim of the worker ID
	// trusts it alone.
	Release(ctx context.Context, lease Lease, lastTimestamp time.Time) error
}

// StaticLeaseStore is a LeaseStore that can also hold one given worker ID,
// for a process configured with a static worker ID (LeasedConfig.Static):
// the ID is recorded in the same table as leased ones, so that the two
// can never collide, and it gets the same heartbeat and floor.
type StaticLeaseStore interface {
	LeaseStore
	// ClaimStatic leases workerID to owner until now+ttl, and pins it:
	// Claim never hands a pinned worker ID to anyone, even after its
	// lease expired. It returns an error wrapping ErrNoFreeWorker while
	// another owner's lease on it is live. The Lease's LastTimestamp
	// follows the same rule as Claim's.
	ClaimStatic(ctx context.Context, owner string, workerID int64, now time.Time, ttl time.Duration) (Lease, error)

	// Unpin returns a static worker ID that is no longer configured
	// anywhere to the pool Claim takes from. Its lease and floor stay as
	// they are.
	Unpin(ctx context.Context, workerID int64) error
}

// RangeClaimer is a LeaseStore that can confine a claim to part of the
// worker IDs, so that idgen can run beside other generators that keep
// worker IDs of their own (LeasedConfig.WorkerRange). Leased finds it by
// type assertion.
type RangeClaimer interface {
	// ClaimRange is Claim for the lowest free worker ID in from..to-1.
	ClaimRange(ctx context.Context, owner string, now time.Time, ttl time.Duration, from, to int64) (Lease, error)
}

// LeaseTable is a StaticLeaseStore, RangeClaimer and LayoutClaimer whose
// worker IDs and layouts can be listed, free or leased: what every store
// of idgen returns from Leases, so that tools can show the table as well
// as lease from it, and move it to another layout.
type LeaseTable interface {
	StaticLeaseStore
	RangeClaimer
	LayoutClaimer
	// Workers returns the table's worker IDs, free or leased, ordered by
	// worker ID. A leased one whose ExpiresAt has passed is free to claim.
	Workers(ctx context.Context) ([]Lease, error)
	// Layouts returns the layouts recorded for the table, oldest first.
	Layouts(ctx context.Context) ([]LayoutRecord, error)
	// Relayout moves the table to layout to, as PlanRelayout describes,
	// in one transaction: it returns ErrLayoutInUse while any lease is
	// live at now, and otherwise ends every expired lease so that no old
	// holder can renew it, retires every layout in use and records to.
	// It returns to's record, whose NotBefore is the floor of its IDs.
	Relayout(ctx context.Context, to Layout, now time.Time, maxWait time.Duration) (LayoutRecord, error)
}

// CheckClaim checks Claim's arguments against the LeaseStore contract, so
// that every implementation refuses the same input before any I/O: an
// owner of 1 to 128 bytes, a TTL from 1ms to 2^31-1 ms (about 24 days, what
// an INT column of milliseconds holds), and at least one worker ID.
func CheckClaim(owner string, ttl time.Duration, maxWorkers int64) error {
	switch {
	case owner == "" || len(owner) > 128:
		return fmt.Errorf("snowflake: invalid claim: owner must be 1 to 128 bytes, got %d", len(owner))
	case ttl < time.Millisecond || ttl > math.MaxInt32*time.Millisecond:
		return fmt.Errorf("snowflake: invalid claim: ttl must be from 1ms to about 24 days, got %v", ttl)
	case maxWorkers < 1:
		return fmt.Errorf("snowflake: invalid claim: maxWorkers must be at least 1, got %d", maxWorkers)
	}
	return nil
}
