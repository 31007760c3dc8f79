package sqlstore

// A lease's check-in: the record generation each checked lease
// transaction notes on the rows of its owner (see Guard.checkedIn).

import "context"

// checkIn records on the lease a checked transaction takes or renews
// the generation of the record it was checked against (Guard.checkedIn).
type checkIn struct {
	g   *Guard
	gen int64
}

// The rows of one owner are checked in in ascending worker ID, and a
// renewal takes its own row in that order too (before the rows above it,
// after those below): a serve process renews its worker lease and its
// presence lease under one owner on timers of the same period, and each
// renewal checks in the other's row. Taken in opposite orders, the two
// transactions deadlocked; on PostgreSQL both then waited out the
// deadlock timeout, failed together, retried together and deadlocked
// again until the worker lease lapsed under a live process.

// others checks in, in ascending worker ID, every row other than except
// that this process was told owner holds and that satisfies keep. A
// live instance that lost a lease to a lapse and claimed another worker
// ID must not leave its old row, which a fence may be holding, to hold
// others' reservations back for the whole hold. By primary key: a scan
// by owner would lock every row on InnoDB and serialise concurrent
// claims. A row whose check-in matches nothing was claimed by another
// since, or released: it is forgotten.
func (c checkIn) others(ctx context.Context, q Querier, s *Leases, owner string, except int64, keep func(int64) bool) error {
	if c.g == nil {
		return nil
	}
	for _, w := range s.heldBy(owner, except) {
		if !keep(w) {
			continue
		}
		n, err := c.g.checkedIn(ctx, q, c.gen, w, owner)
		if err != nil {
			return err
		}
		if n == 0 {
			s.forget(w)
		}
	}
	return nil
}

// own checks in worker, the row the transaction claimed or renewed.
func (c checkIn) own(ctx context.Context, q Querier, worker int64, owner string) error {
	_, err := c.g.checkedIn(ctx, q, c.gen, worker, owner)
	return err
}

func all(int64) bool { return true }
