package testtime_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testtime"
)

// WaitFor returns at once when the condition holds, and the condition's
// own error when it never does; neither depends on how fast time passes.
func TestWaitFor(t *testing.T) {
	calls := 0
	if err := testtime.WaitFor(0, 0, func() error { calls++; return nil }); err != nil || calls != 1 {
		t.Fatalf("WaitFor of a condition that holds = %v after %d calls", err, calls)
	}
	down := errors.New("down")
	if err := testtime.WaitFor(0, 0, func() error { return down }); !errors.Is(err, down) {
		t.Fatalf("WaitFor of a condition that never holds = %v, want its error", err)
	}
	n := 0
	if !testtime.Until(time.Hour, 0, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("Until stopped after %d calls", n)
	}
}

// The clock moves only when told to: by Advance, and by the step at
// every reading once one is set.
func TestClock(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := testtime.New(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	c.Advance(time.Second)
	if got := c.Now(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("after Advance(1s): %v", got)
	}
	c.SetStep(time.Minute)
	if a, b := c.Now(), c.Now(); !a.Equal(t0.Add(time.Second+time.Minute)) || b.Sub(a) != time.Minute {
		t.Fatalf("with a step of 1m: %v then %v", a, b)
	}
}
