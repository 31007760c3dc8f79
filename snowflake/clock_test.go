package snowflake

import (
	"sync"
	"time"
)

// t0 is the fake clock's usual start: a whole millisecond after the default
// epoch, so that tests can reason in whole milliseconds.
var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// fakeClock is a Clock whose time moves only when told to. Sleep advances
// it instead of blocking, so waits cost nothing and can be measured.
type fakeClock struct {
	mu     sync.Mutex
	wall   time.Time
	mono   time.Duration
	slept  time.Duration // total of all Sleep calls
	sleeps int
	glitch time.Duration // added to the wall reading of the next Now only
}

func newFakeClock(wall time.Time) *fakeClock { return &fakeClock{wall: wall, mono: time.Hour} }

func (c *fakeClock) Now() (time.Time, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.wall.Add(c.glitch)
	c.glitch = 0
	return w, c.mono
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d = max(d, 0)
	c.wall = c.wall.Add(d)
	c.mono += d
	c.slept += d
	c.sleeps++
}

// Advance lets d of real time pass.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
	c.mono += d
}

// StepWall steps the wall clock by d, as NTP or an operator would, leaving
// the monotonic clock alone.
func (c *fakeClock) StepWall(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
}

// Glitch makes the next reading's wall clock off by d, as when a thread is
// descheduled between reading the two clocks.
func (c *fakeClock) Glitch(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.glitch = d
}

// Slept returns the total time slept so far.
func (c *fakeClock) Slept() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept
}

func (c *fakeClock) Wall() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall
}
