package lock_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/idgen/idgen/lock"
)

// checks records what a Guard told its observer.
type checks []error

func (c *checks) TokenChecked(err error) { *c = append(*c, err) }

// TestGuard_Observer: the observer hears every Check's answer, the same
// error the caller gets, a stale token as ErrStaleToken.
func TestGuard_Observer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "obs.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	var seen checks
	g, err := lock.NewGuard(lock.GuardConfig{Dialect: lock.SQLite, Observer: &seen})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		key   string
		token int64
		want  error // nil, lock.ErrStaleToken, or errAny
	}{
		{"r", 5, nil},
		{"r", 5, nil},
		{"r", 4, lock.ErrStaleToken},
		{"r", 0, errAny}, // never granted: refused before any SQL
		{"", 6, lock.ErrInvalidName},
	} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := g.Check(ctx, tx, tc.key, tc.token)
		if got == nil {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		if tc.want != errAny && !errors.Is(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Fatalf("check %d (%q, %d): %v, want %v", i, tc.key, tc.token, got, tc.want)
		}
		if len(seen) != i+1 || seen[i] != got {
			t.Fatalf("check %d: observer heard %v, want %d answers ending in %v", i, seen, i+1, got)
		}
	}
}

var errAny = errors.New("any error")
