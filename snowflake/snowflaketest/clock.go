package snowflaketest

import (
	"sync"
	"time"
)

// Clock is a snowflake.Clock whose time moves only when told to. Sleep
// advances it instead of blocking, so a generator's waits cost nothing and
// can be measured. It is safe for concurrent use.
type Clock struct {
	mu    sync.Mutex
	wall  time.Time
	mono  time.Duration
	slept time.Duration
}

// NewClock returns a Clock whose wall clock reads wall.
func NewClock(wall time.Time) *Clock { return &Clock{wall: wall, mono: time.Hour} }

// Now implements snowflake.Clock.
func (c *Clock) Now() (time.Time, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall, c.mono
}

// Sleep implements snowflake.Clock by advancing the clock by d.
func (c *Clock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d = max(d, 0)
	c.wall = c.wall.Add(d)
	c.mono += d
	c.slept += d
}

// Advance lets d of time pass on both clocks.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
	c.mono += d
}

// StepWall steps the wall clock by d, as NTP or an operator would, and
// leaves the monotonic clock alone.
func (c *Clock) StepWall(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
}

// Wall returns the wall clock's time.
func (c *Clock) Wall() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall
}

// Slept returns the total of all Sleep calls.
func (c *Clock) Slept() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept
}
