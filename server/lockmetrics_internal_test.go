package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/segment"
)

func TestLockOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "granted"},
		{&lockHeldError{}, "held"},
		{&lock.HeldError{}, "held"},
		{fmt.Errorf("renew: %w", lock.ErrLost), "lost"},
		{lock.ErrNotHeld, "not_held"},
		{errLockLimit, "limit"},
		{lock.ErrInvalidName, "invalid"},
		{lock.ErrInvalidOwner, "invalid"},
		{lock.ErrInvalidTTL, "invalid"},
		{errLockWait, "invalid"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "canceled"},
		{fmt.Errorf("%w: lock store: down", segment.ErrUnavailable), "error"},
	} {
		if got := lockOutcome(tc.err, "granted"); got != tc.want {
			t.Errorf("lockOutcome(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// A Guard's answers land in idgen_lock_guard_checks_total by result.
func TestMetrics_TokenChecked(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	for _, err := range []error{nil, nil, fmt.Errorf("%w: token 3", lock.ErrStaleToken), errors.New("guard: no row")} {
		m.TokenChecked(err)
	}
	text := scrape(t, m)
	for _, want := range []string{
		`idgen_lock_guard_checks_total{result="accepted"} 2`,
		`idgen_lock_guard_checks_total{result="stale"} 1`,
		`idgen_lock_guard_checks_total{result="error"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
