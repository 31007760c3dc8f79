package snowflake

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrLeaseLost is returned by LeaseStore.Renew and Release when the
	// lease has expired and been claimed by another owner, or no longer
	// exists. The holder must stop issuing at once (Generator.Pause).
	ErrLeaseLost = errors.New("snowflake: worker lease lost")

	// ErrNoFreeWorker is returned by LeaseStore.Claim when every worker ID
	// in 0..maxWorkers-1 is held by an unexpired lease.
	ErrNoFreeWorker = errors.New("snowflake: no free worker ID")
)

// Lease is one owner's hold on a worker ID until ExpiresAt.
type Lease struct {
	// WorkerID is the leased worker ID.
	WorkerID int64
	// Owner identifies the holding process, as given to Claim; Renew and
	// Release succeed only for the owner.
	Owner string
	// ExpiresAt is when the lease lapses unless renewed, on the store's
	// clock.
	ExpiresAt time.Time
	// LastTimestamp is a time at or after every ID issued under this worker
	// ID so far. A new holder passes it as Config.NotBefore (or to
	// Generator.Resume).
	LastTimestamp time.Time
}

// LeaseStore hands out worker IDs so that no two live processes share one.
// It is declared here, where it is used, and implemented over the database
// elsewhere.
//
// Implementations must be safe for concurrent use across processes, and
// must keep this promise about LastTimestamp, on which the uniqueness of
// IDs across restarts rests: the LastTimestamp Claim returns is at or after
// the millisecond of every ID issued under the worker ID before. Renew and
// Release record the holder's Generator.LastTimestamp, but a holder that
// crashes may have issued IDs after its last renewal; so when Claim takes
// over a lease that expired rather than one that was released, it returns
// the later of the recorded LastTimestamp and the old lease's ExpiresAt.
// That is sound because the old holder stops issuing at its lease deadline
// (Generator.SetDeadline) even if it never hears that the lease was lost.
//
// A holder uses it like this: Claim a lease and pass its WorkerID and
// LastTimestamp to New; renew well before ExpiresAt, each time calling
// SetDeadline with the expiry less a skew margin; on ErrLeaseLost or
// repeated failure call Pause; on shutdown call Pause, then Release with
// the then-final LastTimestamp.
type LeaseStore interface {
	// Claim leases a free or expired worker ID in 0..maxWorkers-1 to owner
	// for ttl, or returns ErrNoFreeWorker.
	Claim(ctx context.Context, owner string, ttl time.Duration, maxWorkers int64) (Lease, error)

	// Renew extends lease by ttl from now and records lastTimestamp (never
	// moving the stored one backwards), returning the updated lease, or
	// ErrLeaseLost if lease's owner no longer holds it.
	Renew(ctx context.Context, lease Lease, lastTimestamp time.Time, ttl time.Duration) (Lease, error)

	// Release records lastTimestamp and frees the worker ID for others at
	// once, or returns ErrLeaseLost if lease's owner no longer holds it.
	Release(ctx context.Context, lease Lease, lastTimestamp time.Time) error
}
