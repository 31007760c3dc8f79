package sqlstore

// The manual repairs of `idgen tag bump`: moving one tag's max_id, or
// every tag's and the tag floor with them, past what a restore or a
// failover may have lost.

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/fence"
)

// Bump moves max_id up by n, skipping n IDs, and returns the new max_id:
// the repair after a restore or a failover that lost commits, for IDs
// that instances which have since restarted may have handed out.
func (s *Store) Bump(ctx context.Context, tag string, n int64) (int64, error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: bump by %d: max_id only moves up", segment.ErrInvalidStep, n)
	}
	var to int64
	err := s.advance(ctx, "bump", tag, func(maxID, _ int64) (int64, error) {
		if maxID > math.MaxInt64-n {
			return 0, fmt.Errorf("%w: tag %q at %d cannot grow by %d", segment.ErrExhausted, tag, maxID, n)
		}
		to = maxID + n
		return to, nil
	})
	return to, wrap("bump", tag, err)
}

// BumpAll moves every tag's max_id up by n, and the tag floor with it
// (see start), in one transaction, and returns every tag with its new
// max_id: `idgen tag bump --all`, the manual fence after a restore. The
// floor makes a tag whose creation the restore lost, created again,
// start above what the lost row handed out, as after a fence; and a
// process that saw the raised floor adds it to the margin of a fence
// after a loss that takes the bump with it (fence.NewPlan). It fails
// sets a tag it would carry past the int64 limit to the limit, as a
// fence does: exhausted, so that it refuses rather than repeats, and so
// that one exhausted tag does not keep the others from the repair. The
// idgen_fence row is written first, as a fence and a creation write it,
// so that the three take their locks in one order.
func (s *Store) BumpAll(ctx context.Context, n int64) ([]segment.Tag, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: bump by %d: max_id only moves up", segment.ErrInvalidStep, n)
	}
	var out []segment.Tag
	err := retry(ctx, s.d, &s.retryHook, "bump", func() error {
		return s.g.run(ctx, func(snap fence.Memory) (*reading, error) {
			var r *reading
			err := s.db.InTx(ctx, func(q Querier) error {
				var err error
				r, out, err = s.bumpAllTx(ctx, q, snap, n)
				return err
			})
			return r, err
		})
	})
	if err != nil {
		return nil, wrap("bump", "", err)
	}
	return out, nil
}

// bumpAllTx is BumpAll's transaction.
func (s *Store) bumpAllTx(ctx context.Context, q Querier, snap fence.Memory, n int64) (*reading, []segment.Tag, error) {
	var r *reading
	if s.d.Identity != nil {
		if _, err := q.Exec(ctx, s.d.Identity.RaiseFloor, int64(math.MaxInt64)-n, n); err != nil {
			return nil, nil, fmt.Errorf("raise the tag floor (is migration 00010 applied?): %w", err)
		}
	}
	if s.g != nil {
		// Read after the write: under the row's lock, and with the floor
		// this transaction raised, which the process then remembers.
		var err error
		if r, err = s.g.read(ctx, q, snap); err != nil {
			return nil, nil, err
		}
		// Snowflake's part of the repair, as a fence's: a process paused
		// through the restore may wake with a lease the store no longer
		// shows, still live by its own clock for up to the fleet's TTL. No
		// worker stamps below this floor, so a new holder of its worker ID
		// stamps only once that lease has lapsed (clocks within TTL/10).
		if _, err := s.g.readParams(ctx, q); err != nil {
			return nil, nil, err
		}
		c := s.g.config()
		if err := (primitives{s.g, q}).Floor(ctx, time.Now().Add(c.LeaseTTL+c.LeaseMargin).UnixMilli()); err != nil {
			return nil, nil, fmt.Errorf("raise the workers' timestamp floors: %w", err)
		}
	}
	if _, err := q.Exec(ctx, s.d.AdvanceAll, int64(math.MaxInt64)-n, n); err != nil {
		return nil, nil, err
	}
	if s.g != nil {
		// Lock tokens granted in the lost history are below every token
		// granted after, as after a fence (lock names the restore lost
		// start above the raised tag floor).
		if _, err := q.Exec(ctx, s.g.id.LockBump, int64(math.MaxInt64)-n, n); err != nil {
			return nil, nil, fmt.Errorf("raise the lock tokens (migration 00016): %w", err)
		}
	}
	rows, err := q.Query(ctx, s.d.ListMax)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var out []segment.Tag
	for rows.Next() {
		var t segment.Tag
		if err := rows.Scan(&t.Name, &t.MaxID); err != nil {
			return nil, nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return r, out, nil
}
