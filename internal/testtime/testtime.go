// Package testtime is time for the module's tests, in one place: Clock,
// a fake clock for the Now seams (segment.Options.Now,
// idempotency.Config.Now), and WaitFor and Until, which bound a wait on a
// condition that no fake clock drives (real processes, databases, other
// goroutines' progress). Code that runs in-process on timers is better
// tested in a testing/synctest bubble, where time itself is fake.
//
// It imports nothing of the module and no driver, so that any test may
// use it without linking more.
package testtime

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Clock is a fake clock: its time moves only by Advance, or by a step
// at every reading once SetStep is called. The zero Clock reads the zero
// time; most tests start it with New.
type Clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

// New returns a Clock at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time, after moving it by its step.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// SetStep makes every later reading move the clock by d first, as code
// would see it whose every statement, a store's say, takes d.
func (c *Clock) SetStep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step = d
}

// WaitFor calls cond every interval until it returns nil or timeout has
// passed, and then returns nil or cond's last error, saying how long it
// waited. The timeout only bounds a wait that failed: a test passes as
// soon as cond holds, and never on how long that took.
func WaitFor(timeout, every time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(every)
	}
}

var errNotYet = errors.New("testtime: the condition does not hold yet")

// Until is WaitFor for a condition without a reason: whether cond held
// within timeout.
func Until(timeout, every time.Duration, cond func() bool) bool {
	return WaitFor(timeout, every, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) == nil
}
