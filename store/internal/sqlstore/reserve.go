package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/internal/plant"
)

// The reservation's transaction: the tag's row locked, the store's
// identity, its fence record's generation and the tag's mark read beside
// it and checked, the row advanced and the mark written; and the
// hand-back that sets both back.

// Reserve implements segment.Store: SELECT … FOR UPDATE, then UPDATE, in
// one short transaction. A transaction the database aborted as a deadlock
// or serialization failure is run again, up to retries times: on a
// multi-primary cluster such as Galera, row locks are local to a node, so
// two nodes can reserve the same row at once and certification aborts
// one of them at COMMIT. The loser read nothing that survives, so trying
// again is the whole remedy; without it the allocator would back off as
// if the database were down.
func (s *Store) Reserve(ctx context.Context, tag string, step int64) (segment.Range, error) {
	var r segment.Range
	err := s.advance(ctx, "reserve", tag, func(maxID, rowStep int64) (int64, error) {
		end, err := segment.ClampEnd(tag, maxID, max(step, rowStep))
		if err != nil {
			return 0, err
		}
		r = segment.Range{Start: maxID, End: end, Step: rowStep}
		return r.End, nil
	})
	if err != nil {
		return segment.Range{}, wrap("reserve", tag, err)
	}
	s.g.reserve(tag, r.Start, r.End, r.Step)
	return r, nil
}

// Raise implements segment.Raiser: it moves max_id up to to, never down.
func (s *Store) Raise(ctx context.Context, tag string, to int64) (bool, error) {
	raised := false
	err := s.advance(ctx, "raise", tag, func(maxID, _ int64) (int64, error) {
		raised = maxID < to
		return max(maxID, to), nil
	})
	return raised, wrap("raise", tag, err)
}

// advance sets a tag's max_id to what next returns for the row's max_id
// and step, read under the row lock, in one transaction. A next that
// returns max_id itself writes nothing. A transaction the dialect calls
// retryable is run again (see retry), and counted under op.
//
// With a Guard, the transaction also checks the store's identity, read in
// the LockRow statement itself, and the store is fenced first if it
// changed (see Guard); a reservation is held back after a fence until the
// other instances have checked in (Guard.held).
func (s *Store) advance(ctx context.Context, op, tag string, next func(maxID, step int64) (int64, error)) error {
	return retry(ctx, s.d, &s.retryHook, op, func() error {
		return s.g.run(ctx, func(snap fence.Memory) (*reading, error) {
			// A record newer than snap, seen after the row lock was
			// granted, runs the transaction again with the record read
			// and checked first: the witness raise and the hold of a fence
			// that kept the identity (a forced one) apply to this process
			// from its next reservation, not its next renewal.
			full := false
			for restarts := 0; ; restarts++ {
				r, err := s.advanceOnce(ctx, op == "reserve", tag, next, snap, full)
				if !errors.Is(err, errNewRecord) || restarts == maxFences {
					return r, err
				}
				full = true
			}
		})
	})
}

// errNewRecord rolls back a reservation that found a fence record newer
// than the one it was checked against (Store.advance).
var errNewRecord = errors.New("store: the fence record changed during the reservation")

// advanceOnce is one transaction of advance. Unless full is set or snap
// knows nothing yet, the server's identity, the record's generation and
// the tag's mark are read in the row's locking statement and checked
// against snap (one statement); otherwise the record is read and checked
// first (Guard.read).
func (s *Store) advanceOnce(ctx context.Context, reserve bool, tag string, next func(maxID, step int64) (int64, error), snap fence.Memory, full bool) (*reading, error) {
	var r *reading
	err := s.db.InTx(ctx, func(q Querier) error {
		var maxID, rowStep, gen, mark int64
		var err error
		switch {
		case s.g == nil:
			err = q.QueryRow(ctx, s.d.LockRow, tag).Scan(&maxID, &rowStep)
		case s.lockRow == "":
			if r, err = s.g.read(ctx, q, snap); err == nil {
				err = q.QueryRow(ctx, s.d.LockRow, tag).Scan(&maxID, &rowStep)
			}
		case full || !snap.Known:
			if r, err = s.g.read(ctx, q, snap); err == nil {
				var server [4]string
				err = q.QueryRow(ctx, s.lockRow, tag).Scan(&maxID, &rowStep, &server[0], &server[1], &server[2], &server[3], &gen, &mark)
			}
			if err == nil && gen != r.rec.Generation {
				err = errNewRecord // a fence committed between the two reads
			}
		default:
			r = s.g.newReading()
			r.fromMemory(snap)
			err = q.QueryRow(ctx, s.lockRow, tag).Scan(append(append([]any{&maxID, &rowStep}, r.serverDest()...), &gen, &mark)...)
			if err == nil && gen != snap.Generation && !plant.On("F1") {
				err = errNewRecord
			}
			if err == nil {
				err = s.g.connSystem(ctx, q, r)
			}
			if err == nil {
				err = s.g.check(ctx, q, snap, r)
			}
		}
		if err == nil && reserve {
			err = s.g.held(ctx, q)
		}
		if err != nil {
			if errors.Is(err, s.d.NoRows) {
				return fmt.Errorf("%w: %q", segment.ErrTagNotFound, tag)
			}
			return err
		}
		if plant.On("F2") {
			mark = 0
		}
		if mark > maxID {
			if mark, err = s.markNow(ctx, q, tag); err != nil {
				return err
			}
		}
		if err := s.wentBack(tag, maxID, mark); err != nil {
			return err
		}
		to, err := next(maxID, rowStep)
		if err != nil || to == maxID {
			return err
		}
		if _, err = q.Exec(ctx, s.d.Advance, to, tag); err != nil || !reserve || r == nil || s.lockRow == "" {
			return err
		}
		n, err := q.Exec(ctx, s.d.MarkSet, tag, to, r.rec.Generation)
		if err == nil && n == 0 && !plant.On("F1") {
			return errNewRecord
		}
		return err
	})
	return r, err
}

// wentBack returns the evidence that a tag's row went back, read under
// its row lock: below its mark (idgen_mark), which every reservation
// writes in its own transaction, whichever process made it; or below the
// end of a range this process reserved (fence.HighWater.Went), which
// also covers a loss that took the mark back with the row while the
// server's identity kept its position (a whole restore of a server
// without one). The store then fences (a regression is evidence), unless
// by then, under the fence's lock, the row is no longer below.
func (s *Store) wentBack(tag string, maxID, mark int64) error {
	if s.g == nil {
		return nil
	}
	var reason string
	byMark := mark > maxID
	if byMark {
		reason = fmt.Sprintf("tag %q's max_id %d is below its mark %d, the end of the last range reserved: the row went back", tag, maxID, mark)
	} else if went, hw := s.g.went(tag, maxID); went {
		reason = fmt.Sprintf("tag %q's max_id %d is below %d, the end of a range this process reserved: the store went back", tag, maxID, hw)
		mark = hw
	} else {
		return nil
	}
	return &errFence{d: fence.Decision{Verdict: fence.Fence, Reason: reason}, force: true,
		still: func(ctx context.Context, q Querier) (bool, error) {
			var now, step int64
			err := q.QueryRow(ctx, s.d.LockRow, tag).Scan(&now, &step)
			if errors.Is(err, s.d.NoRows) {
				return true, nil
			}
			if err == nil && byMark {
				// A hand-back that committed meanwhile moved the mark
				// down with the row.
				mark, err = s.markNow(ctx, q, tag)
			}
			return err == nil && now < mark, err
		}}
}

// markNow reads tag's mark as last committed (MarkLock), 0 if it has
// none.
func (s *Store) markNow(ctx context.Context, q Querier, tag string) (int64, error) {
	var mark int64
	err := q.QueryRow(ctx, s.d.MarkLock, tag).Scan(&mark)
	if errors.Is(err, s.d.NoRows) {
		return 0, nil
	}
	return mark, err
}

// Release implements segment.Releaser with a compare-and-set on max_id,
// in a checked transaction (a hand-back on a server whose history
// changed fences before it writes) that moves the tag's mark down with
// the row.
func (s *Store) Release(ctx context.Context, tag string, from, to int64) (bool, error) {
	done := s.g.releasing(tag, from, to)
	var n int64
	err := retry(ctx, s.d, &s.retryHook, "release", func() error {
		return s.g.run(ctx, func(snap fence.Memory) (*reading, error) {
			var r *reading
			err := s.db.InTx(ctx, func(q Querier) error {
				var err error
				if s.g != nil {
					if r, err = s.g.read(ctx, q, snap); err != nil {
						return err
					}
				}
				if n, err = q.Exec(ctx, s.d.Release, from, tag, to); err != nil || n != 1 || s.lockRow == "" {
					return err
				}
				_, err = q.Exec(ctx, s.d.MarkRelease, from, tag, to)
				return err
			})
			return r, err
		})
	})
	if err == nil {
		done(n == 1)
	}
	// else the error may have come after the commit: the hand-back stays
	// in flight, so that a row it may have left is no regression.
	if err != nil {
		return false, wrap("release", tag, err)
	}
	return n == 1, nil
}
