package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// conflictDB is a worker_node table of free rows whose first failures
// transactions abort at COMMIT, as Galera certification aborts them.
type conflictDB struct {
	failures, txs int
}

func (d *conflictDB) QueryRow(ctx context.Context, q string, args ...any) Row {
	return rowFunc(func(dest ...any) error {
		switch len(dest) {
		case 3: // WorkerSelectFree (id, expires, last) or WorkerSelectOne (owner, expires, last)
			if p, ok := dest[0].(*string); ok {
				*p = ""
			} else {
				*dest[0].(*int64) = 7
			}
			*dest[1].(*int64), *dest[2].(*int64) = 0, 0
		default:
			return errors.New("unexpected query")
		}
		return nil
	})
}

func (d *conflictDB) Query(context.Context, string, ...any) (Rows, error) {
	return nil, errors.New("not used")
}

func (d *conflictDB) Exec(context.Context, string, ...any) (int64, error) { return 1, nil }

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
// again, like a leased claim, and counted as a retried claim.
func TestClaimsRetry(t *testing.T) {
	d := Dialect{NoRows: errNoRows, WorkerSeed: "INSERT %s", IsRetryable: func(err error) bool { return errors.Is(err, errConflict) }}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		claim func(l *Leases) (int64, error)
	}{
		{"static", func(l *Leases) (int64, error) {
			lease, err := l.ClaimStatic(ctx, "owner-a", 7, time.Now(), 10*time.Second)
			return lease.WorkerID, err
		}},
		{"leased", func(l *Leases) (int64, error) {
			lease, err := l.Claim(ctx, "owner-a", time.Now(), 10*time.Second, 1024)
			return lease.WorkerID, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &conflictDB{failures: 3}
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
			if retried != 3 || db.txs != 4 {
				t.Errorf("%d retries in %d transactions, want 3 in 4", retried, db.txs)
			}
		})
	}
}
