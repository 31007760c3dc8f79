package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idgen/idgen/snowflake"
)

// leaseTable names worker_node's records in snowflake_layout, whose key
// leaves room for lease tables of other names.
const leaseTable = "worker_node"

var _ snowflake.LeaseTable = (*Leases)(nil)

// ClaimLayout implements snowflake.LayoutClaimer: ClaimStatic or
// ClaimRange, admitting the claim against the table's layout records
// (snowflake.AdmitLayout) and recording it in the claim's transaction.
// Every claim and relayout of the table first locks its record of ordinal
// 0, created by the first claim outside the transaction: so of two
// processes that start together with layouts whose IDs could be equal, the
// second to take the lock sees the first's record and is refused.
func (s *Leases) ClaimLayout(ctx context.Context, owner string, now time.Time, ttl time.Duration, layout snowflake.Layout, workers snowflake.WorkerRange, static int64) (snowflake.Lease, error) {
	if static >= 0 {
		return s.claimStatic(ctx, owner, static, now, ttl, &layout)
	}
	return s.claimRange(ctx, owner, now, ttl, workers.From, workers.To, &layout)
}

// anchorLayout creates the table's record of ordinal 0 if there is none,
// in a statement of its own: inside the claim's transaction, MySQL's
// INSERT IGNORE of an existing row takes a shared lock that two claims
// then both try to upgrade, and deadlock.
func (s *Leases) anchorLayout(ctx context.Context, layout *snowflake.Layout) error {
	if layout == nil {
		return nil
	}
	l := *layout
	_, err := s.db.Exec(ctx, s.d.LayoutAnchor, leaseTable, l.Epoch().UnixMilli(), l.TimeBits(), l.WorkerBits(), l.SequenceBits())
	if err != nil {
		return fmt.Errorf("record the snowflake layout: %w", err)
	}
	return nil
}

// admitLayout admits a claim of workers in layout, in the claim's
// transaction q, records it, and returns the claim's floor in Unix
// milliseconds. A nil layout admits anything, with no floor.
func (s *Leases) admitLayout(ctx context.Context, q Querier, layout *snowflake.Layout, workers snowflake.WorkerRange) (int64, error) {
	if layout == nil {
		return 0, nil
	}
	records, err := s.lockLayouts(ctx, q)
	if err != nil {
		return 0, err
	}
	rec, at, err := snowflake.AdmitLayout(records, *layout, workers)
	if err != nil {
		return 0, err
	}
	if err := s.writeLayout(ctx, q, rec, at, at == len(records)); err != nil {
		return 0, err
	}
	// Rewritten unchanged so that every admission writes record 0: on a
	// multi-primary cluster (Galera) row locks are local to a node, and
	// only overlapping writes make certification abort one of two claims
	// that admitted clashing layouts on different nodes.
	if at != 0 {
		if err := s.writeLayout(ctx, q, records[0], 0, false); err != nil {
			return 0, err
		}
	}
	return snowflake.LeaseMillis(rec.NotBefore), nil
}

// lockLayouts locks the table's record of ordinal 0, then reads every
// record, in that order: on PostgreSQL a statement that waited for a lock
// still sees the rows of its own snapshot, so only a read after the lock
// sees records the previous holder added.
func (s *Leases) lockLayouts(ctx context.Context, q Querier) ([]snowflake.LayoutRecord, error) {
	var ordinal int64
	if err := q.QueryRow(ctx, s.d.LayoutLock, leaseTable).Scan(&ordinal); err != nil {
		return nil, fmt.Errorf("lock the snowflake layout: %w", err)
	}
	return s.readLayouts(ctx, q, s.d.LayoutSelect)
}

func (s *Leases) readLayouts(ctx context.Context, q Querier, query string) ([]snowflake.LayoutRecord, error) {
	rows, err := q.Query(ctx, query, leaseTable)
	if err != nil {
		return nil, fmt.Errorf("read the snowflake layout: %w", err)
	}
	defer rows.Close()
	var out []snowflake.LayoutRecord
	for rows.Next() {
		var ordinal, epoch, timeBits, workerBits, seqBits, from, to, notBefore, retired int64
		if err := rows.Scan(&ordinal, &epoch, &timeBits, &workerBits, &seqBits, &from, &to, &notBefore, &retired); err != nil {
			return nil, fmt.Errorf("read the snowflake layout: %w", err)
		}
		if ordinal != int64(len(out)) {
			return nil, fmt.Errorf("read the snowflake layout: record %d follows %d; the ordinals of %s must run from 0 without gaps", ordinal, len(out)-1, leaseTable)
		}
		l, err := snowflake.NewLayout(time.UnixMilli(epoch), int(timeBits), int(workerBits), int(seqBits))
		if err != nil {
			return nil, fmt.Errorf("read the snowflake layout: record %d: %w", ordinal, err)
		}
		out = append(out, snowflake.LayoutRecord{Layout: l, Workers: snowflake.WorkerRange{From: from, To: to},
			NotBefore: snowflake.LeaseTime(notBefore), Retired: snowflake.LeaseTime(retired)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the snowflake layout: %w", err)
	}
	return out, nil
}

// writeLayout stores rec as the record of ordinal at.
func (s *Leases) writeLayout(ctx context.Context, q Querier, rec snowflake.LayoutRecord, at int, insert bool) error {
	var err error
	l, w := rec.Layout, rec.Workers
	cols := []any{l.Epoch().UnixMilli(), l.TimeBits(), l.WorkerBits(), l.SequenceBits(), w.From, w.To, snowflake.LeaseMillis(rec.NotBefore), snowflake.LeaseMillis(rec.Retired)}
	if insert {
		_, err = q.Exec(ctx, s.d.LayoutInsert, append([]any{leaseTable, at}, cols...)...)
	} else {
		_, err = q.Exec(ctx, s.d.LayoutUpdate, append(cols, leaseTable, at)...)
	}
	if err != nil {
		return fmt.Errorf("record the snowflake layout: %w", err)
	}
	return nil
}

// Layouts implements snowflake.LeaseTable.
func (s *Leases) Layouts(ctx context.Context) ([]snowflake.LayoutRecord, error) {
	out, err := s.readLayouts(ctx, s.db, s.d.LayoutList)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return out, nil
}

// Relayout implements snowflake.LeaseTable, under the same lock as claims.
func (s *Leases) Relayout(ctx context.Context, to snowflake.Layout, now time.Time, maxWait time.Duration) (snowflake.LayoutRecord, error) {
	var next snowflake.LayoutRecord
	err := s.db.InTx(ctx, func(q Querier) error {
		var ordinal int64
		if err := q.QueryRow(ctx, s.d.LayoutLock, leaseTable).Scan(&ordinal); err != nil {
			if errors.Is(err, s.d.NoRows) {
				_, err = snowflake.PlanRelayout(nil, time.Time{}, to, now, maxWait)
			}
			return err
		}
		records, err := s.readLayouts(ctx, q, s.d.LayoutSelect)
		if err != nil {
			return err
		}
		// Locked, so that a holder whose clock is behind ours cannot
		// renew between the check and the disowning.
		if live, err := s.liveLeases(ctx, q, now); err != nil || live != "" {
			if err == nil {
				err = fmt.Errorf("%w: stop every instance that leases from %s first: %s", snowflake.ErrLayoutInUse, leaseTable, live)
			}
			return err
		}
		if _, err := q.Exec(ctx, s.d.WorkerDisown); err != nil {
			return err
		}
		var latest int64
		if err := q.QueryRow(ctx, s.d.WorkerLatest).Scan(&latest); err != nil {
			return err
		}
		planned, err := snowflake.PlanRelayout(records, snowflake.LeaseTime(latest), to, now, maxWait)
		if err != nil {
			return err
		}
		// Every record, record 0 among them, as admitLayout explains.
		for i, rec := range planned {
			if err := s.writeLayout(ctx, q, rec, i, i == len(records)); err != nil {
				return err
			}
		}
		next = planned[len(records)]
		return nil
	})
	if err != nil {
		return snowflake.LayoutRecord{}, fmt.Errorf("store: relayout %s: %w", leaseTable, err)
	}
	return next, nil
}

// liveLeases locks every row with an owner and describes those whose
// lease is live at now, or returns "" if none is.
func (s *Leases) liveLeases(ctx context.Context, q Querier, now time.Time) (string, error) {
	rows, err := q.Query(ctx, s.d.WorkerHeld)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var live []string
	for rows.Next() {
		var id, expires int64
		var owner string
		if err := rows.Scan(&id, &owner, &expires); err != nil {
			return "", err
		}
		if expires > now.UnixMilli() {
			live = append(live, fmt.Sprintf("worker %d is held by %q until %s", id, owner, snowflake.LeaseTime(expires).Format(time.RFC3339Nano)))
		}
	}
	return strings.Join(live, "; "), rows.Err()
}
