package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"
)

// Grant is one grant of a lock.
type Grant struct {
	Name  string
	Owner string
	// Token is strictly increasing per lock name across every grant, on
	// every backend; a reentrant acquire keeps it.
	Token int64
	// Expires is when the grant lapses unless renewed, by the backend's
	// clock.
	Expires time.Time
}

// Backend stores grants. Every method is atomic on the backend and
// checks owner and token together, so that a renewal never takes a lost
// lock back and a release never frees a newer grant. Implementations:
// store.Store.Locks (SQL), lock/redisstore, lock/etcdstore; each passes
// lock/locktest.
type Backend interface {
	// Acquire grants name to owner for ttl: at once if the lock is
	// free, lapsed or already owner's (then with the same token and a
	// TTL from now). Otherwise, if wait, it queues owner and grants in
	// arrival order once the lock frees up, until ctx ends; without
	// wait, or when ctx ends, it returns a *HeldError naming the holder.
	Acquire(ctx context.Context, name, owner string, ttl time.Duration, wait bool) (Grant, error)
	// Renew extends g to ttl from now if g is still the lock's grant, or
	// returns an error wrapping ErrLost.
	Renew(ctx context.Context, g Grant, ttl time.Duration) (Grant, error)
	// Release frees the lock if g is its grant, or returns an error
	// wrapping ErrNotHeld and leaves it alone.
	Release(ctx context.Context, g Grant) error
	// Describe returns who holds name and who waits for it.
	Describe(ctx context.Context, name string) (Info, error)
}

// Info is a lock as Describe finds it.
type Info struct {
	Name string
	// Holder is the live grant, nil while the lock is free or lapsed.
	Holder *Grant
	// Since is when Holder's token was granted.
	Since time.Time
	// Waiters are the owners queued for the lock, in arrival order.
	Waiters []Waiter
}

// Waiter is an owner queued for a lock.
type Waiter struct {
	Owner string
	Since time.Time // when it queued
}

// Errors, grouped by when they happen.
var (
	// ErrInvalidName, ErrInvalidOwner and ErrInvalidTTL are returned
	// for a request the Locker refuses before any I/O.
	ErrInvalidName  = errors.New("lock: invalid lock name")
	ErrInvalidOwner = errors.New("lock: invalid owner")
	ErrInvalidTTL   = errors.New("lock: TTL out of bounds")
	// ErrInvalidOptions is returned by New for Options that cannot work.
	ErrInvalidOptions = errors.New("lock: invalid options")

	// ErrHeld is returned (as a *HeldError) when another owner holds
	// the lock: by TryAcquire, or by Acquire when its context ends first.
	ErrHeld = errors.New("lock: held by another owner")
	// ErrLost is returned by a renewal that found the grant gone, lapsed
	// or taken over, and is a Lease's Err once it is lost that way.
	ErrLost = errors.New("lock: the lease was lost")
	// ErrExpired is a Lease's Err when its renewals failed until its TTL
	// ran out: the backend may still show it, but another may take it.
	ErrExpired = errors.New("lock: the lease expired before a renewal succeeded")
	// ErrNotHeld is returned by a release of a grant that is not the
	// lock's: another owner's, or an older token's.
	ErrNotHeld = errors.New("lock: not held by this grant")
	// ErrReleased is a Lease's Err after its Release.
	ErrReleased = errors.New("lock: released")

	// ErrStaleToken is returned by a Guard for a write whose token is
	// below one the resource has accepted: its holder lost the lock.
	ErrStaleToken = errors.New("lock: stale fencing token")
)

// HeldError is ErrHeld with the holder.
type HeldError struct {
	Holder Grant
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lock: %q is held by %q until %s", e.Holder.Name, e.Holder.Owner, e.Holder.Expires.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// MaxNameLen and MaxOwnerLen bound names and owners, in bytes, so that
// every backend can key on them.
const (
	MaxNameLen  = 200
	MaxOwnerLen = 200
)

// Options configure a Locker. The zero value of every field selects the
// default written next to it.
type Options struct {
	// MinTTL and MaxTTL bound the TTLs callers may ask for. Zero means
	// 1s and 10m.
	MinTTL, MaxTTL time.Duration
	// RenewEvery is how often a Lease renews, as a fraction of its TTL:
	// zero means 3 (every TTL/3, as etcd and Redisson do).
	RenewEvery int
	// Logger receives failed renewals and losses. Nil means discard.
	Logger *slog.Logger
}

// Locker hands out Leases over a Backend. It is safe for concurrent use.
type Locker struct {
	b    Backend
	opts Options

	mu   sync.Mutex
	held map[holderKey]*Lease // live leases, for reentrant acquires
}

type holderKey struct{ name, owner string }

// New returns a Locker over b, or an error wrapping ErrInvalidOptions.
func New(b Backend, o Options) (*Locker, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalidOptions)
	}
	if o.MinTTL == 0 {
		o.MinTTL = time.Second
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = 10 * time.Minute
	}
	if o.RenewEvery == 0 {
		o.RenewEvery = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.MinTTL < 10*time.Millisecond || o.MaxTTL < o.MinTTL:
		return nil, fmt.Errorf("%w: MinTTL %v, MaxTTL %v: want 10ms ≤ MinTTL ≤ MaxTTL", ErrInvalidOptions, o.MinTTL, o.MaxTTL)
	case o.RenewEvery < 2:
		return nil, fmt.Errorf("%w: RenewEvery %d: want at least 2 renewals per TTL", ErrInvalidOptions, o.RenewEvery)
	}
	return &Locker{b: b, opts: o, held: map[holderKey]*Lease{}}, nil
}

// Check returns the error Acquire would refuse name, owner and ttl with
// before any I/O, or nil.
func (l *Locker) Check(name, owner string, ttl time.Duration) error {
	if err := checkText(name, MaxNameLen); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidName, err)
	}
	if err := checkText(owner, MaxOwnerLen); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOwner, err)
	}
	if ttl < l.opts.MinTTL || ttl > l.opts.MaxTTL {
		return fmt.Errorf("%w: %v is outside [%v, %v]", ErrInvalidTTL, ttl, l.opts.MinTTL, l.opts.MaxTTL)
	}
	return nil
}

// checkText accepts 1 to max bytes of printable UTF-8.
func checkText(s string, max int) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > max:
		return fmt.Errorf("%d bytes, more than %d", len(s), max)
	case !utf8.ValidString(s):
		return errors.New("not UTF-8")
	}
	for i, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("control character at byte %d", i)
		}
	}
	return nil
}

// Acquire waits until owner holds name for ttl, in arrival order among
// waiters, or until ctx ends (then a *HeldError, or ctx's error if the
// backend could not be asked). The Lease renews itself until Release.
func (l *Locker) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (*Lease, error) {
	return l.acquire(ctx, name, owner, ttl, true)
}

// TryAcquire is Acquire without the wait: a *HeldError at once if
// another owner holds name.
func (l *Locker) TryAcquire(ctx context.Context, name, owner string, ttl time.Duration) (*Lease, error) {
	return l.acquire(ctx, name, owner, ttl, false)
}

func (l *Locker) acquire(ctx context.Context, name, owner string, ttl time.Duration, wait bool) (*Lease, error) {
	if err := l.Check(name, owner, ttl); err != nil {
		return nil, err
	}
	sent := time.Now()
	g, err := l.b.Acquire(ctx, name, owner, ttl, wait)
	if err != nil {
		return nil, err
	}
	// The lease's deadline counts from before the request, since the
	// grant's moment is unknown; after a wait that is too early, and the
	// lease would expire at once, so it starts from a renewal instead.
	if every := ttl / time.Duration(l.opts.RenewEvery); time.Since(sent) > every {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), every)
		sent = time.Now()
		g, err = l.b.Renew(rctx, g, ttl)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("lock: renew %q after the wait: %w", name, err)
		}
	}
	k := holderKey{name, owner}
	l.mu.Lock()
	defer l.mu.Unlock()
	if le := l.held[k]; le != nil && le.extend(g, sent, ttl) {
		return le, nil
	}
	le := newLease(l, g, sent, ttl)
	l.held[k] = le
	return le, nil
}

// forget drops le from the live leases once it ends.
func (l *Locker) forget(le *Lease) {
	k := holderKey{le.g.Name, le.g.Owner}
	l.mu.Lock()
	if l.held[k] == le {
		delete(l.held, k)
	}
	l.mu.Unlock()
}

// Do runs fn while owner holds name, as bbolt's db.Update runs a
// transaction: it acquires (waiting as Acquire does), runs fn with a
// context that ends if the lease is lost, and releases whatever fn does,
// panics included. fn must pass the lease's token to the resource it
// protects (Guard). A lease lost while fn ran is reported with fn's
// error.
func (l *Locker) Do(ctx context.Context, name, owner string, ttl time.Duration, fn func(ctx context.Context, le *Lease) error) (err error) {
	le, err := l.Acquire(ctx, name, owner, ttl)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
		defer cancel()
		err = errors.Join(err, le.Release(rctx)) // a loss is Release's error
	}()
	return fn(le.Context(), le)
}
