package segment

import (
	"fmt"
	"log/slog"
	"time"
)

// Options configures an Allocator. It is a value, checked once by New:
// every zero field means the default written next to it, so Options{} is
// complete, and a field New cannot use is an error wrapping
// ErrInvalidConfig.
type Options struct {
	// AutoCreate creates a tag's row on its first use, with DefaultStep
	// and DefaultStart. When false, unknown tags get ErrTagNotFound.
	AutoCreate bool
	// DefaultStep is the step of auto-created tags. Default 1000.
	DefaultStep int64
	// DefaultStart is the first ID of auto-created tags. Default 1.
	DefaultStart int64
	// DefaultOpaque is the Tag.Opaque of auto-created tags: the
	// fingerprint of the key whose permutation hides their counters
	// (package opaque), or "" (the default) for plain tags.
	DefaultOpaque string
	// MaxTags bounds how many tags the allocator holds, and so its memory
	// and what a flood of made-up tags can create: past it, a tag not
	// held yet gets ErrTagLimit before any I/O. Default 0: no limit.
	MaxTags int

	// PrefetchRatio is the share of a segment handed out before the next
	// segment is loaded in the background. Default 0.1, as in Leaf: the
	// next segment then has 90% of the current one's lifetime to arrive.
	PrefetchRatio float64

	// WaitTimeout bounds how long a caller waits for a load in flight when
	// both buffers are empty, on top of the caller's own context.
	// Default 3s.
	WaitTimeout time.Duration
	// LoadTimeout bounds one reservation against the store. Default 5s.
	LoadTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed loads.
	// While backing off, callers that need a new segment get
	// ErrUnavailable at once instead of queueing on a dead store.
	// Defaults 100ms and 5s.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// NegativeTTL is how long an unknown tag is remembered as unknown, so
	// that a flood of requests for it does not become a flood of queries.
	// Default 2s.
	NegativeTTL time.Duration

	// FixedStep turns the dynamic step off: every load reserves the row's
	// step.
	FixedStep bool
	// MaxStep caps the dynamic step. Default 1,000,000.
	MaxStep int64
	// GrowBelow doubles the step when a segment lasted less than this.
	// Default 15 minutes.
	GrowBelow time.Duration
	// ShrinkAbove halves the step, but never below the row's step, when a
	// segment lasted more than this. Default 30 minutes.
	ShrinkAbove time.Duration

	// ReleaseTimeout bounds how long Close spends handing unused ranges
	// back to the store. Default 2s.
	ReleaseTimeout time.Duration

	// Observer, if set, is told about loads and waits, for metrics.
	Observer Observer
	// Logger receives load failures and recoveries. Default: discard.
	Logger *slog.Logger

	// Now is the clock for step, backoff and negative-cache decisions.
	// Nil means time.Now; tests and simulations replace it to drive
	// those decisions on a clock of their own.
	Now func() time.Time
}

// Observer is told about the allocator's slow-path events. Its methods
// are called outside the allocator's locks and must not block.
type Observer interface {
	// SegmentLoaded is called after each reservation attempt.
	SegmentLoaded(tag string, size int64, latency time.Duration, err error)
	// WaitedForLoad is called when a caller found both buffers empty and
	// had to wait for, or fail on, a load.
	WaitedForLoad(tag string)
}

// RegressionObserver is an Observer that is also told about regressions:
// ranges the store handed out below the end of one this allocator
// reserved before. Such a range is skipped, never handed out. It is a
// separate interface so that existing Observers keep compiling.
type RegressionObserver interface {
	SegmentRegressed(tag string, r Range, highWater int64)
}

// ReleaseObserver is an Observer that is also told about hand-backs: ids
// IDs of tag that the store took back, so that they are handed out
// again instead of lost. shutdown is true for the unused rest of the
// allocator's own segments, handed back by Close and Shutdown, and false
// for a range's tail handed back through ReleaseRange. Only hand-backs
// the store accepted are reported: a refused one (someone reserved past
// the range) or a failed one leaves its IDs unused, and the shutdown log
// line counts those as kept.
type ReleaseObserver interface {
	SegmentReleased(tag string, ids int64, shutdown bool)
}

func (c Options) withDefaults() (Options, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.DefaultStep == 0 {
		c.DefaultStep = 1000
	}
	if c.DefaultStart == 0 {
		c.DefaultStart = 1
	}
	if c.PrefetchRatio == 0 {
		c.PrefetchRatio = 0.1
	}
	def(&c.WaitTimeout, 3*time.Second)
	def(&c.LoadTimeout, 5*time.Second)
	def(&c.MinBackoff, 100*time.Millisecond)
	def(&c.MaxBackoff, 5*time.Second)
	def(&c.NegativeTTL, 2*time.Second)
	def(&c.GrowBelow, 15*time.Minute)
	def(&c.ShrinkAbove, 30*time.Minute)
	def(&c.ReleaseTimeout, 2*time.Second)
	if c.MaxStep == 0 {
		c.MaxStep = 1_000_000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}

	switch {
	case c.DefaultStep < 1:
		return c, fmt.Errorf("%w: DefaultStep must be at least 1, got %d", ErrInvalidConfig, c.DefaultStep)
	case c.MaxTags < 0:
		return c, fmt.Errorf("%w: MaxTags must be at least 0 (0: no limit), got %d", ErrInvalidConfig, c.MaxTags)
	case c.DefaultStart < 0:
		return c, fmt.Errorf("%w: DefaultStart must be at least 0, got %d", ErrInvalidConfig, c.DefaultStart)
	case c.PrefetchRatio < 0 || c.PrefetchRatio >= 1:
		return c, fmt.Errorf("%w: PrefetchRatio must be in (0, 1), got %v", ErrInvalidConfig, c.PrefetchRatio)
	case c.WaitTimeout < 0 || c.LoadTimeout < 0 || c.NegativeTTL < 0 || c.ReleaseTimeout < 0:
		return c, fmt.Errorf("%w: timeouts must not be negative", ErrInvalidConfig)
	case c.MinBackoff < 0 || c.MaxBackoff < c.MinBackoff:
		return c, fmt.Errorf("%w: need 0 <= MinBackoff <= MaxBackoff, got %v and %v", ErrInvalidConfig, c.MinBackoff, c.MaxBackoff)
	case c.MaxStep < 1:
		return c, fmt.Errorf("%w: MaxStep must be at least 1, got %d", ErrInvalidConfig, c.MaxStep)
	case c.ShrinkAbove < c.GrowBelow:
		return c, fmt.Errorf("%w: ShrinkAbove (%v) must not be below GrowBelow (%v)", ErrInvalidConfig, c.ShrinkAbove, c.GrowBelow)
	}
	return c, nil
}
