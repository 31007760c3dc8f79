package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease is a held lock. A watchdog renews it at a third of its TTL (see
// Options.RenewEvery) while the holder works; a renewal that fails is
// retried until the TTL, measured from when the last successful request
// was sent, runs out. Then, or when the backend says the grant is gone,
// the lease is lost: Lost is closed, Context is cancelled and Err says
// why. The holder must stop writing, and its writes carry Token so that
// the resource refuses them if it did not (Guard).
//
// A Lease is safe for concurrent use.
type Lease struct {
	l     *Locker
	lost  chan struct{}
	ctx   context.Context
	cause context.CancelCauseFunc
	// The watchdog is a timer, not a goroutine: a lease costs nothing
	// between renewals. renewing is held while a renewal runs, so that
	// Release, after cancelling it (rcancel), waits for it to end.
	timer    *time.Timer
	renewing sync.Mutex
	rctx     context.Context
	rcancel  context.CancelFunc

	mu       sync.Mutex
	g        Grant
	ttl      time.Duration
	deadline time.Time // by this process's monotonic clock
	err      error
	stopped  bool
}

func newLease(l *Locker, g Grant, sent time.Time, ttl time.Duration) *Lease {
	ctx, cause := context.WithCancelCause(context.Background())
	rctx, rcancel := context.WithCancel(context.Background())
	le := &Lease{l: l, lost: make(chan struct{}), ctx: ctx, cause: cause, rctx: rctx, rcancel: rcancel,
		g: g, ttl: ttl, deadline: sent.Add(ttl)}
	// renew reads le.timer: holding renewing until it is set orders a
	// first tick that fires at once (a tiny TTL, a synctest bubble) after it.
	le.renewing.Lock()
	le.timer = time.AfterFunc(le.every(), le.renew)
	le.renewing.Unlock()
	return le
}

// every is the time between renewals.
func (le *Lease) every() time.Duration {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.ttl / time.Duration(le.l.opts.RenewEvery)
}

// Name, Owner and Token are the grant's.
func (le *Lease) Name() string  { return le.Grant().Name }
func (le *Lease) Owner() string { return le.Grant().Owner }
func (le *Lease) Token() int64  { return le.Grant().Token }

// Grant returns the grant as last renewed.
func (le *Lease) Grant() Grant {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.g
}

// Lost is closed when the lease is lost (not when it is released).
func (le *Lease) Lost() <-chan struct{} { return le.lost }

// Context is cancelled when the lease is lost or released; its cause is
// Err.
func (le *Lease) Context() context.Context { return le.ctx }

// Err is nil while the lease is held, then wraps ErrLost, ErrExpired or
// ErrReleased.
func (le *Lease) Err() error {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.err
}

// extend takes a reentrant grant g, sent at sent, into le if it is le's
// own (the same token) and le is live; a grant with another token means
// le's was lost meanwhile.
func (le *Lease) extend(g Grant, sent time.Time, ttl time.Duration) bool {
	le.mu.Lock()
	if le.err == nil && g.Token == le.g.Token {
		le.g, le.ttl, le.deadline = g, ttl, sent.Add(ttl)
		le.mu.Unlock()
		return true
	}
	le.mu.Unlock()
	le.end(fmt.Errorf("%w: %q was granted to %q again with token %d", ErrLost, g.Name, g.Owner, g.Token), true)
	return false
}

// end records why the lease ended, once; lost says whether it was lost.
func (le *Lease) end(err error, lost bool) {
	le.mu.Lock()
	if le.err != nil {
		le.mu.Unlock()
		return
	}
	le.err = err
	le.mu.Unlock()
	le.cause(err) // before Lost closes: a holder woken by Lost finds the cause
	if lost {
		close(le.lost)
		le.l.opts.Logger.Warn("lock: lease lost", "name", le.g.Name, "owner", le.g.Owner, "token", le.g.Token, "err", err)
	}
}

// renew is the watchdog's tick: it renews the lease, or ends it lost.
func (le *Lease) renew() {
	le.renewing.Lock()
	defer le.renewing.Unlock()
	le.mu.Lock()
	g, ttl, deadline, over := le.g, le.ttl, le.deadline, le.stopped || le.err != nil
	le.mu.Unlock()
	if over {
		return
	}
	if !time.Now().Before(deadline) {
		le.end(fmt.Errorf("%w: %q (token %d): no renewal succeeded within its TTL %v", ErrExpired, g.Name, g.Token, ttl), true)
		le.l.forget(le)
		return
	}
	sent := time.Now()
	ctx, cancel := context.WithDeadline(le.rctx, deadline)
	ng, err := le.l.b.Renew(ctx, g, ttl)
	cancel()
	switch {
	case err == nil:
		le.mu.Lock()
		if le.g.Token == ng.Token {
			le.g, le.deadline = ng, sent.Add(ttl)
		}
		le.mu.Unlock()
		le.timer.Reset(le.every())
	case errors.Is(err, ErrLost):
		le.end(err, true)
		le.l.forget(le)
	case le.rctx.Err() != nil:
		// released
	default:
		// Retried well within the TTL; a loss is declared only when it
		// has run out, since the grant may still stand.
		le.l.opts.Logger.Warn("lock: renewal failed; retrying", "name", g.Name, "owner", g.Owner, "token", g.Token, "err", err)
		le.timer.Reset(max(min(le.every()/5, time.Until(deadline)), time.Millisecond))
	}
}

// Release stops the watchdog, waits until no renewal is in flight, and
// frees the lock if this lease still holds it. Releasing a lost lease
// returns its Err; releasing twice returns nil.
func (le *Lease) Release(ctx context.Context) error {
	le.mu.Lock()
	if le.stopped {
		le.mu.Unlock()
		return nil
	}
	le.stopped = true
	le.mu.Unlock()
	le.rcancel() // a renewal in flight ends now
	le.timer.Stop()
	le.renewing.Lock() // waits for it; none runs after this
	defer le.renewing.Unlock()
	le.l.forget(le)
	if err := le.Err(); err != nil {
		return err
	}
	le.end(ErrReleased, false)
	if err := le.l.b.Release(ctx, le.Grant()); err != nil {
		return fmt.Errorf("lock: release %q: %w", le.g.Name, err)
	}
	return nil
}
