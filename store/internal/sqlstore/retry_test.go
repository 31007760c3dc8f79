package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/idgen/idgen/segment"
)

var (
	errConflict = errors.New("certification conflict")
	errDown     = errors.New("connection refused")
	errNoRows   = errors.New("no rows")
)

// flakyDB runs Reserve's transaction against one in-memory row, failing
// the first failures transactions with err, as a database that aborted
// them would: nothing they did is kept.
type flakyDB struct {
	err      error
	failures int

	mu    sync.Mutex
	maxID int64
	txs   int
}

func (d *flakyDB) QueryRow(ctx context.Context, q string, args ...any) Row { return d.row() }
func (d *flakyDB) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	return nil, errors.New("not used")
}
func (d *flakyDB) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	d.maxID = args[0].(int64)
	return 1, nil
}

func (d *flakyDB) InTx(ctx context.Context, fn func(q Querier) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.txs++
	saved := d.maxID
	err := fn(d)
	if err == nil && d.txs <= d.failures {
		err = fmt.Errorf("commit: %w", d.err)
	}
	if err != nil {
		d.maxID = saved
	}
	return err
}

type rowFunc func(dest ...any) error

func (f rowFunc) Scan(dest ...any) error { return f(dest...) }

func (d *flakyDB) row() Row {
	return rowFunc(func(dest ...any) error {
		*dest[0].(*int64), *dest[1].(*int64) = d.maxID, 10
		return nil
	})
}

func TestReserveRetries(t *testing.T) {
	d := Dialect{NoRows: errNoRows, IsRetryable: func(err error) bool { return errors.Is(err, errConflict) }}
	for _, tc := range []struct {
		name        string
		err         error
		failures    int
		wantErr     error
		wantRetries int
		wantTxs     int
		wantRange   segment.Range
	}{
		{"no conflict", errConflict, 0, nil, 0, 1, segment.Range{Start: 100, End: 110, Step: 10}},
		{"three conflicts, then committed", errConflict, 3, nil, 3, 4, segment.Range{Start: 100, End: 110, Step: 10}},
		{"conflicts up to the bound", errConflict, retries, nil, retries, retries + 1, segment.Range{Start: 100, End: 110, Step: 10}},
		{"one conflict too many", errConflict, retries + 1, errConflict, retries, retries + 1, segment.Range{}},
		{"not retryable", errDown, 5, errDown, 0, 1, segment.Range{}},
	} {
		// In a synctest bubble: the backoffs, up to 20 of them and 64 ms
		// each, pass in fake time.
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db := &flakyDB{err: tc.err, failures: tc.failures, maxID: 100}
				s := New(db, d)
				var mu sync.Mutex
				seen := map[string]int{}
				s.ObserveRetries(func(op string) { mu.Lock(); seen[op]++; mu.Unlock() })
				r, err := s.Reserve(context.Background(), "t", 10)
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
					t.Fatalf("Reserve err = %v, want %v", err, tc.wantErr)
				}
				if r != tc.wantRange {
					t.Errorf("Reserve = %+v, want %+v", r, tc.wantRange)
				}
				if seen["reserve"] != tc.wantRetries || len(seen) > 1 {
					t.Errorf("retries observed %v, want reserve=%d", seen, tc.wantRetries)
				}
				if db.txs != tc.wantTxs {
					t.Errorf("%d transactions, want %d", db.txs, tc.wantTxs)
				}
				// A failed reservation leaves max_id alone; a good one moves it once.
				if want := 100 + (tc.wantRange.End - tc.wantRange.Start); db.maxID != want {
					t.Errorf("max_id = %d, want %d", db.maxID, want)
				}
			})
		})
	}
}

func TestReserveRetryStopsWithContext(t *testing.T) {
	d := Dialect{NoRows: errNoRows, IsRetryable: func(err error) bool { return errors.Is(err, errConflict) }}
	db := &flakyDB{err: errConflict, failures: 1 << 30, maxID: 0}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New(db, d).Reserve(ctx, "t", 1); !errors.Is(err, errConflict) {
		t.Fatalf("Reserve err = %v, want the conflict", err)
	}
	if db.txs != 1 {
		t.Errorf("%d transactions after the context ended, want 1", db.txs)
	}
}
