package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idgen/idgen/snowflake"
)

// conflictDB is a worker_node table of free rows, with no layout records
// yet, whose first failures transactions abort at COMMIT and whose first
// anchorFailures layout anchors abort, as Galera certification aborts
// them.
type conflictDB struct {
	failures, txs           int
	anchorFailures, anchors int
}

func (d *conflictDB) QueryRow(ctx context.Context, q string, args ...any) Row {
	return rowFunc(func(dest ...any) error {
		switch len(dest) {
		case 3: // WorkerSelectFree (id, expires, last)
			*dest[0].(*int64) = 7
			*dest[1].(*int64), *dest[2].(*int64) = 0, 0
		case 4: // WorkerSelectOne (owner, expires, last, seen)
			*dest[0].(*string) = ""
			*dest[1].(*int64), *dest[2].(*int64), *dest[3].(*int64) = 0, 0, 0
		case 1: // LayoutLock (ordinal)
			*dest[0].(*int64) = 0
		default:
			return errors.New("unexpected query")
		}
		return nil
	})
}

func (d *conflictDB) Query(_ context.Context, q string, _ ...any) (Rows, error) {
	if q != layoutSelect {
		return nil, errors.New("unexpected query")
	}
	return noRows{}, nil
}

func (d *conflictDB) Exec(_ context.Context, q string, _ ...any) (int64, error) {
	if q == layoutAnchor {
		if d.anchors++; d.anchors <= d.anchorFailures {
			return 0, errConflict
		}
	}
	return 1, nil
}

// noRows is a query's answer of no rows.
type noRows struct{}

func (noRows) Next() bool        { return false }
func (noRows) Scan(...any) error { return errNoRows }
func (noRows) Err() error        { return nil }
func (noRows) Close()            {}

// The layout statements of the fake dialect, told apart by their text.
const (
	layoutAnchor = "ANCHOR"
	layoutSelect = "SELECT LAYOUTS"
)

func (d *conflictDB) InTx(ctx context.Context, fn func(q Querier) error) error {
	d.txs++
	if err := fn(d); err != nil {
		return err
	}
	if d.txs <= d.failures {
		return fmt.Errorf("commit: %w", errConflict)
	}
	return nil
}

// A static claim aborted as a deadlock or a certification conflict is run
// again, like a leased claim, and counted as a retried claim; so is the
// layout's anchor, a statement of its own before the claim's transaction,
// which on Galera a claim on another node writing record 0 aborts too.
func TestClaimsRetry(t *testing.T) {
	d := Dialect{NoRows: errNoRows, WorkerSeed: "INSERT %s", LayoutAnchor: layoutAnchor, LayoutLock: "LOCK",
		LayoutSelect: layoutSelect, IsRetryable: func(err error) bool { return errors.Is(err, errConflict) }}
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		anchorFailures int
		claim          func(l *Leases) (int64, error)
	}{
		{"static", 0, func(l *Leases) (int64, error) {
			lease, err := l.ClaimStatic(ctx, "owner-a", 7, time.Now(), 10*time.Second)
			return lease.WorkerID, err
		}},
		{"leased", 0, func(l *Leases) (int64, error) {
			lease, err := l.Claim(ctx, "owner-a", time.Now(), 10*time.Second, 1024)
			return lease.WorkerID, err
		}},
		{"static with a layout", 2, func(l *Leases) (int64, error) {
			lease, err := l.ClaimLayout(ctx, "owner-a", time.Now(), 10*time.Second, snowflake.Layout{}, snowflake.WorkerRange{}, 7)
			return lease.WorkerID, err
		}},
		{"leased with a layout", 2, func(l *Leases) (int64, error) {
			lease, err := l.ClaimLayout(ctx, "owner-a", time.Now(), 10*time.Second, snowflake.Layout{}, snowflake.WorkerRange{From: 0, To: 1024}, -1)
			return lease.WorkerID, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &conflictDB{failures: 3, anchorFailures: tc.anchorFailures}
			l := NewLeases(db, d)
			retried := 0
			l.ObserveRetries(func(op string) {
				if op == "claim" {
					retried++
				}
			})
			id, err := tc.claim(l)
			if err != nil || id != 7 {
				t.Fatalf("claim after 3 conflicts = %d, %v; want worker 7", id, err)
			}
			if want := 3 + tc.anchorFailures; retried != want || db.txs != 4 {
				t.Errorf("%d retries in %d transactions, want %d in 4", retried, db.txs, want)
			}
		})
	}
}
