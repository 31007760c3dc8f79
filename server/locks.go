package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/segment"
)

// Locks as a service (docs/locks.md, "Over HTTP and gRPC"): lockService
// is the one implementation of the lock calls, over a lock.Backend
// (usually store.Store.Locks), for every transport: gin's /locks routes
// (lockhttp.go) and idgen.v1.LockService on connect-go and grpc-go
// (lockrpc.go). The transports parse requests, admit the caller and
// encode answers; names, owners, TTLs, waits, the table of names and the
// backend's answers are decided here.

// LockConfig configures the lock API. The zero value of each field but
// Backend selects the default written next to it.
type LockConfig struct {
	// Backend stores the grants. Nil answers the lock routes with 404
	// locks_disabled (UNIMPLEMENTED over gRPC).
	Backend lock.Backend
	// MinTTL and MaxTTL bound the TTLs callers may ask for. Zero means
	// 1s and 10m, lock.Options' defaults.
	MinTTL, MaxTTL time.Duration
	// MaxWait bounds how long one acquire waits for another owner's
	// grant to end; a longer wait is cut to it, as a range size is cut
	// to MaxRange. Zero means 10s; at most MaxLockWait.
	MaxWait time.Duration
	// MaxNames bounds the lock names this server tracks (lockNames), as
	// --max-tags bounds tags. Zero means 10,000.
	MaxNames int
}

// MaxLockWait is the longest LockConfig.MaxWait: a wait must end, and be
// answered, well within NewHTTPServer's 30 s write timeout.
const MaxLockWait = 20 * time.Second

// Lock API defaults (LockConfig).
const (
	DefaultLockMaxWait  = 10 * time.Second
	DefaultLockMaxNames = 10_000
)

var (
	errLocksDisabled = &apiError{http.StatusNotFound, "locks_disabled", "this server serves no locks: it has no lock store"}
	errLockWait      = &apiError{http.StatusBadRequest, "invalid_lock_wait", "wait must be a Go duration (\"2s\") of zero or more; the server cuts a longer one to its --lock-max-wait"}
	errLockToken     = &apiError{http.StatusBadRequest, "invalid_lock_token", "token must be the decimal token of the grant, as a JSON string (\"42\")"}
	errLockLimit     = &apiError{http.StatusConflict, "lock_limit_reached",
		"this server already tracks its maximum number of lock names; restart it with a higher --max-locks, or reuse names"}
	// Lock calls keep no keys: an owner's repeated acquire already gets
	// its own grant back, with the same token, and a renewal or release
	// repeated is answered by the lock's state.
	errLockKeys = &apiError{http.StatusBadRequest, "idempotency_not_supported",
		"lock calls keep no idempotency keys: an owner that acquires again gets its own grant back, with the same token; drop the Idempotency-Key header"}
)

// lockService is the lock API's one implementation (see above).
type lockService struct {
	b lock.Backend
	// rules is used for its Check only: the lock package's one rule for
	// names, owners and TTL bounds. It hands out no leases.
	rules   *lock.Locker
	minTTL  time.Duration
	maxWait time.Duration
	names   *lockNames
	// obs counts calls, waits and losses (lockmetrics.go).
	obs lockObserver
}

// newLockService checks cfg once; nil, nil without a backend.
func newLockService(cfg LockConfig) (*lockService, error) {
	if cfg.Backend == nil {
		return nil, nil
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultLockMaxWait
	}
	if cfg.MaxNames == 0 {
		cfg.MaxNames = DefaultLockMaxNames
	}
	if cfg.MaxWait < 0 || cfg.MaxWait > MaxLockWait {
		return nil, fmt.Errorf("%w: Locks.MaxWait %v: want 0 < MaxWait ≤ %v", ErrInvalidConfig, cfg.MaxWait, MaxLockWait)
	}
	if cfg.MaxNames < 0 {
		return nil, fmt.Errorf("%w: Locks.MaxNames %d: want 1 or more, or 0 for %d", ErrInvalidConfig, cfg.MaxNames, DefaultLockMaxNames)
	}
	rules, err := lock.New(cfg.Backend, lock.Options{MinTTL: cfg.MinTTL, MaxTTL: cfg.MaxTTL})
	if err != nil {
		return nil, fmt.Errorf("%w: Locks: %w", ErrInvalidConfig, err)
	}
	if cfg.MinTTL == 0 {
		cfg.MinTTL = time.Second
	}
	return &lockService{b: cfg.Backend, rules: rules, minTTL: cfg.MinTTL, maxWait: cfg.MaxWait,
		names: &lockNames{max: cfg.MaxNames, seen: map[string]uint64{}}, obs: nopLockObserver{}}, nil
}

// lockHeldError is lock_held for one caller: the holder's owner and
// expiry are named only to the admin scope.
type lockHeldError struct {
	holder lock.Grant
	admin  bool
}

func (e *lockHeldError) Error() string { return e.Unwrap().Error() }

// Unwrap is the answer classify finds.
func (e *lockHeldError) Unwrap() error {
	msg := "another owner holds this lock; retry later, or ask with a wait"
	if e.admin {
		msg = fmt.Sprintf("%q holds this lock until %s", e.holder.Owner, e.holder.Expires.UTC().Format(time.RFC3339Nano))
	}
	return &apiError{http.StatusConflict, "lock_held", msg}
}

// acquire grants name to owner for ttl, waiting up to wait (cut to
// maxWait, and ended sooner by ctx) for another owner's grant to end.
func (l *lockService) acquire(ctx context.Context, admin bool, name, owner string, ttl, wait time.Duration) (lock.Grant, error) {
	g, err := l.tryAcquire(ctx, admin, name, owner, ttl, wait)
	l.obs.lockCall("acquire", lockOutcome(err, "granted"))
	return g, err
}

func (l *lockService) tryAcquire(ctx context.Context, admin bool, name, owner string, ttl, wait time.Duration) (lock.Grant, error) {
	if err := l.rules.Check(name, owner, ttl); err != nil {
		return lock.Grant{}, err
	}
	if wait < 0 {
		return lock.Grant{}, errLockWait
	}
	if err := l.names.admit(name); err != nil {
		if l.prune(ctx) == 0 {
			return lock.Grant{}, err
		}
		if err := l.names.admit(name); err != nil {
			return lock.Grant{}, err
		}
	}
	// A first try without waiting: most acquires find the lock free or
	// their own, and only one that finds it held queues, so that waits
	// and their time (lockWaited) count real contention. It costs a
	// contended acquire one more store call, an uncontended one none.
	g, err := l.b.Acquire(ctx, name, owner, ttl, false)
	var he *lock.HeldError
	if wait = min(wait, l.maxWait); wait > 0 && errors.As(err, &he) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		l.obs.lockWaiting(1)
		start := time.Now()
		g, err = l.b.Acquire(wctx, name, owner, ttl, true)
		l.obs.lockWaiting(-1)
		// A wait that ends, by its own timeout or the caller's
		// going, may be a HeldError or a context error: the caller's
		// context tells which.
		out := lockOutcome(err, "granted")
		switch {
		case out == "granted", out == "error":
		case ctx.Err() != nil:
			out = "canceled"
		default:
			out = "held"
		}
		l.obs.lockWaited(out, time.Since(start))
	}
	if errors.As(err, &he) {
		return lock.Grant{}, &lockHeldError{holder: he.Holder, admin: admin}
	}
	return g, storeError(err)
}

// storeError is a backend's error as the answer it gets: the lock
// package's sentinels and context errors as they are, anything else (a
// database that did not answer) as segment.ErrUnavailable, a 503 with
// Retry-After that clients and Leases retry, rather than a 500. The
// cause is logged under the request ID, as for any 5xx.
func storeError(err error) error {
	switch {
	case err == nil, errors.Is(err, lock.ErrLost), errors.Is(err, lock.ErrNotHeld), errors.Is(err, lock.ErrHeld),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, segment.ErrUnavailable):
		return err
	}
	return fmt.Errorf("%w: lock store: %w", segment.ErrUnavailable, err)
}

// renew extends the grant (name, owner, token) to ttl from now. via
// names the caller for idgen_lock_losses_total: "renew" for a Renew
// call, "hold" for a Hold stream's own renewals.
func (l *lockService) renew(ctx context.Context, via, name, owner string, token int64, ttl time.Duration) (lock.Grant, error) {
	g, err := l.tryRenew(ctx, name, owner, token, ttl)
	out := lockOutcome(err, "renewed")
	l.obs.lockCall("renew", out)
	if out == "lost" {
		l.obs.lockLost(via)
	}
	return g, err
}

func (l *lockService) tryRenew(ctx context.Context, name, owner string, token int64, ttl time.Duration) (lock.Grant, error) {
	if err := l.rules.Check(name, owner, ttl); err != nil {
		return lock.Grant{}, err
	}
	// A grant this instance has not seen (acquired through another one)
	// joins the table, without the cap: it is held already.
	l.names.touch(name)
	g, err := l.b.Renew(ctx, lock.Grant{Name: name, Owner: owner, Token: token}, ttl)
	return g, storeError(err)
}

// release frees name if (owner, token) is its grant.
func (l *lockService) release(ctx context.Context, name, owner string, token int64) error {
	err := l.rules.Check(name, owner, l.minTTL)
	if err == nil {
		err = storeError(l.b.Release(ctx, lock.Grant{Name: name, Owner: owner, Token: token}))
	}
	l.obs.lockCall("release", lockOutcome(err, "released"))
	return err
}

// describe returns who holds name and who waits. Owners are named only
// to the admin scope: a caller that may not learn them from lock_held
// does not learn them here either.
func (l *lockService) describe(ctx context.Context, admin bool, name string) (lock.Info, error) {
	if err := l.rules.Check(name, "describe", l.minTTL); err != nil {
		return lock.Info{}, err
	}
	in, err := l.b.Describe(ctx, name)
	if err != nil {
		return lock.Info{}, storeError(err)
	}
	if !admin {
		in = redact(in)
	}
	return in, nil
}

// redact drops the owners' names from in.
func redact(in lock.Info) lock.Info {
	if in.Holder != nil {
		h := *in.Holder
		h.Owner = ""
		in.Holder = &h
	}
	in.Waiters = slices.Clone(in.Waiters)
	for i := range in.Waiters {
		in.Waiters[i].Owner = ""
	}
	return in
}

// list describes every name in the table that is held or waited for,
// sorted by name, and drops the others from the table.
func (l *lockService) list(ctx context.Context) ([]lock.Info, error) {
	names, gen := l.names.snapshot()
	out := make([]lock.Info, 0, len(names))
	var free []string
	for _, n := range names {
		in, err := l.b.Describe(ctx, n)
		if err != nil {
			return nil, storeError(err)
		}
		if in.Holder == nil && len(in.Waiters) == 0 {
			free = append(free, n)
			continue
		}
		out = append(out, in)
	}
	l.names.forget(free, gen)
	return out, nil
}

// prune drops the free names from a full table, and returns how many.
// The table only grows between prunes, so a prune runs when it is
// full; pruneEvery keeps a stream of new names from turning every
// acquire into a scan of the whole table.
func (l *lockService) prune(ctx context.Context) int {
	if !l.names.startPrune(time.Now()) {
		return 0
	}
	names, gen := l.names.snapshot()
	var free []string
	for _, n := range names {
		in, err := l.b.Describe(ctx, n)
		if err != nil {
			break // what was found free so far is still free to drop
		}
		if in.Holder == nil && len(in.Waiters) == 0 {
			free = append(free, n)
		}
	}
	return l.names.forget(free, gen)
}

// admitLock admits a call on the lock name: the admin token always, and
// then with the admin scope (other owners' names); otherwise, when API
// tokens are configured, a token whose tags name the lock or are "*",
// as admitTag admits a tag. h is the call's header or metadata.
func (s *Server) admitLock(h http.Header, name string) (admin bool, err error) {
	if s.locks == nil {
		return false, errLocksDisabled
	}
	if h[idempotency.KeyHeader] != nil {
		return false, errLockKeys
	}
	tok, ok := parseBearer(h.Get("Authorization"))
	if ok && s.auth.isAdmin(tok) {
		return true, nil
	}
	if !s.auth.apiOpen {
		if !ok {
			return false, errUnauthorized
		}
		if err := s.auth.check(tok, name); err != nil {
			return false, err
		}
	}
	return false, nil
}
