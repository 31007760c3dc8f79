package testkit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testkit"
)

func TestFreePortsDiffer(t *testing.T) {
	ports := testkit.FreePorts(t, 8)
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: want 8 distinct positive ones", ports)
		}
		seen[p] = true
	}
}

// WaitFor returns at once when the condition holds, and the condition's
// own error when it never does; neither depends on how fast time passes.
func TestWaitFor(t *testing.T) {
	calls := 0
	if err := testkit.WaitFor(0, 0, func() error { calls++; return nil }); err != nil || calls != 1 {
		t.Fatalf("WaitFor of a condition that holds = %v after %d calls", err, calls)
	}
	down := errors.New("down")
	if err := testkit.WaitFor(0, 0, func() error { return down }); !errors.Is(err, down) {
		t.Fatalf("WaitFor of a condition that never holds = %v, want its error", err)
	}
	n := 0
	if !testkit.Until(time.Hour, 0, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("Until stopped after %d calls", n)
	}
}
