package snowflake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"
)

const (
	defaultLeaseTTL       = 30 * time.Second
	defaultReleaseTimeout = 2 * time.Second
	minLeaseTTL           = 10 * time.Millisecond
	maxOwnerLen           = 128
)

// LeasedConfig configures a Leased generator. The zero value of every
// field selects the default written next to it, so LeasedConfig{} is
// complete.
type LeasedConfig struct {
	// Generator configures the layout, MaxBackward and Clock of the
	// generator, as for New. Its WorkerID must be zero unless Static is
	// set: the lease chooses the worker ID, from 0..2^WorkerBits-1. NotBefore, if set, is a floor
	// on top of the lease's LastTimestamp. The Clock also supplies the
	// times given to the LeaseStore, so a fake one drives lease expiry in
	// tests.
	Generator Config

	// Static holds exactly Generator.WorkerID instead of leasing any free
	// worker ID: a static worker ID, recorded in the lease table like a
	// leased one, so that leased processes never take it and it gets the
	// same heartbeat and the same floor across restarts. NewLeased fails
	// while another live owner holds it. The store must be a
	// StaticLeaseStore.
	Static bool

	// Owner names this process in the lease table. It must be unique to
	// the process, since a lease belongs to its owner, and at most 128
	// bytes. Zero means the store's owner if the LeaseStore names one (an
	// Owner() string method, as store.Store.Leases has: the generator's
	// lease and the store's presence lease are then one process's), and
	// otherwise "<hostname>/<pid>/<8 random hex digits>".
	Owner string

	// TTL is how long a lease lasts unless renewed, which is also how long
	// the worker ID of a process that died without releasing it stays
	// unusable. It is kept in whole milliseconds and must be at least 10ms.
	// Zero means 30s.
	TTL time.Duration

	// RenewInterval is how often the background heartbeat renews the
	// lease, and how long one renewal may take. It must leave Margin before
	// the lease expires: RenewInterval+Margin < TTL. Zero means TTL/3.
	// Negative means no background heartbeat: the program calls Heartbeat
	// itself, as tests do to control every step.
	RenewInterval time.Duration

	// RetryInterval is how soon the background heartbeat tries again after
	// a failed renewal or claim. Zero means RenewInterval/5.
	RetryInterval time.Duration

	// Margin is how long before the lease expires the generator stops
	// issuing if the lease has not been renewed by then: headroom for clock
	// skew between instances and for a renewal that commits late. It must
	// be shorter than TTL. Zero means TTL/10.
	Margin time.Duration

	// WorkerRange confines the lease to part of the layout's worker IDs,
	// so that idgen can run beside generators that keep worker IDs of
	// their own (Leaf's servers with ZooKeeper-assigned ones). A range not
	// starting at 0 needs a store that implements RangeClaimer or
	// LayoutClaimer. Zero means every worker ID.
	WorkerRange WorkerRange

	// ReleaseTimeout bounds how long Close spends releasing the lease;
	// Shutdown takes a context instead. Zero means 2s.
	ReleaseTimeout time.Duration

	// Logger receives lease losses, failed heartbeats and recoveries.
	// Nil means discard; Ready reports the same state.
	Logger *slog.Logger
}

func (c LeasedConfig) withDefaults() (LeasedConfig, error) {
	if c.Generator.WorkerID != 0 && !c.Static {
		return c, fmt.Errorf("%w: leave Generator.WorkerID zero, or set Static: the lease chooses the worker ID", ErrInvalidConfig)
	}
	if c.TTL == 0 {
		c.TTL = defaultLeaseTTL
	}
	if c.TTL < minLeaseTTL {
		return c, fmt.Errorf("%w: TTL %v is below %v", ErrInvalidConfig, c.TTL, minLeaseTTL)
	}
	c.TTL = c.TTL.Truncate(time.Millisecond)
	if c.Margin == 0 {
		c.Margin = c.TTL / 10
	}
	if c.Margin < 0 || c.Margin >= c.TTL {
		return c, fmt.Errorf("%w: Margin %v must be positive and shorter than TTL %v", ErrInvalidConfig, c.Margin, c.TTL)
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = c.TTL / 3
	}
	if c.RenewInterval > 0 && c.RenewInterval+c.Margin >= c.TTL {
		return c, fmt.Errorf("%w: RenewInterval %v plus Margin %v must be shorter than TTL %v, or the generator stops before the lease is renewed; lengthen TTL",
			ErrInvalidConfig, c.RenewInterval, c.Margin, c.TTL)
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = max(c.RenewInterval/5, time.Millisecond)
	}
	if c.RetryInterval < 0 {
		return c, fmt.Errorf("%w: RetryInterval %v is negative", ErrInvalidConfig, c.RetryInterval)
	}
	if c.ReleaseTimeout == 0 {
		c.ReleaseTimeout = defaultReleaseTimeout
	}
	if c.ReleaseTimeout < 0 {
		return c, fmt.Errorf("%w: ReleaseTimeout %v is negative", ErrInvalidConfig, c.ReleaseTimeout)
	}
	if c.Owner == "" {
		c.Owner = NewOwner()
	}
	if len(c.Owner) > maxOwnerLen {
		return c, fmt.Errorf("%w: Owner is %d bytes, more than %d", ErrInvalidConfig, len(c.Owner), maxOwnerLen)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// NewOwner returns a new owner name for a lease, the default of
// LeasedConfig.Owner: "<hostname>/<pid>/<8 random hex digits>", readable
// in the lease table, and unique even for two processes that share a
// host and a PID namespace's numbering, as containers do.
func NewOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms
	suffix := "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b[:])
	if len(host)+len(suffix) > maxOwnerLen {
		host = host[:maxOwnerLen-len(suffix)]
	}
	return host + suffix
}

// Leased is a Generator whose worker ID is leased from a LeaseStore, with
// the heartbeat that keeps the lease and the fencing that stops the
// generator when the lease may be lost. It satisfies idgen.Generator; its
// methods are safe for concurrent use.
//
// Its life is: NewLeased claims a worker ID and starts the heartbeat.
// Each heartbeat renews the lease, records the generator's LastTimestamp
// and moves the generator's deadline to the new expiry less Margin. If
// renewals fail until that deadline, or the store says the lease is lost,
// the generator is paused (Next returns ErrNoWorkerLease, Ready reports
// it) and each later heartbeat tries to claim a worker ID again, possibly
// another one; once one succeeds the generator resumes, still issuing
// increasing IDs. Close releases the lease, so the worker ID is free at
// once.
type Leased struct {
	g          *Generator
	tagged     Tagged
	store      LeaseStore
	static     int64 // the static worker ID, or -1 to lease any
	clock      Clock
	owner      string
	workers    WorkerRange
	ttl        time.Duration
	renewEvery time.Duration
	retryEvery time.Duration
	margin     time.Duration
	release    time.Duration // Close's bound on the release
	log        *slog.Logger

	// sem admits one heartbeat, or Close, at a time. It is held across
	// store calls, so nothing on the ID path ever waits for it.
	sem  chan struct{}
	stop context.CancelFunc // ends the background heartbeat; nil without one
	done chan struct{}      // closed when the background heartbeat has ended

	mu     sync.Mutex // guards the fields below; never held across a store call
	lease  Lease      // the lease that may still be ours; Owner "" if none
	held   bool       // the generator issues under lease
	closed bool
}

// owned is a LeaseStore that knows the owner name of the process that
// opened it.
type owned interface{ Owner() string }

// NewLeased claims a worker ID from store, builds a Generator for it whose
// NotBefore is the lease's LastTimestamp, and starts the heartbeat. ctx
// bounds the claim only; the heartbeat runs until Close.
//
// It returns an error wrapping ErrInvalidConfig if cfg cannot be used, and
// otherwise the claim's error: ErrNoFreeWorker when every worker ID is
// leased, ErrLayoutMismatch when the store is a LayoutClaimer whose table
// has issued IDs in another layout that this one's could equal, or the
// store's. If the clock is behind the lease's
// LastTimestamp, as after a restart on a machine whose clock was stepped
// back, NewLeased still succeeds; Next then waits or returns
// ErrClockMovedBackwards (and Ready reports it) until the clock has caught
// up.
func NewLeased(ctx context.Context, store LeaseStore, cfg LeasedConfig) (*Leased, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil LeaseStore", ErrInvalidConfig)
	}
	if o, ok := store.(owned); ok && cfg.Owner == "" {
		cfg.Owner = o.Owner()
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// Built first, paused, so that a bad layout is reported before any
	// I/O, and so that the first claim takes the same path as a re-claim.
	g, err := New(cfg.Generator)
	if err != nil {
		return nil, err
	}
	static := int64(-1)
	if cfg.Static {
		if _, ok := store.(StaticLeaseStore); !ok {
			return nil, fmt.Errorf("%w: Static needs a StaticLeaseStore, and %T is not one", ErrInvalidConfig, store)
		}
		static = cfg.Generator.WorkerID
	}
	wr := cfg.WorkerRange
	if wr == (WorkerRange{}) {
		wr.To = g.layout.MaxWorkerID() + 1
	}
	if wr.From < 0 || wr.To <= wr.From || wr.To > g.layout.MaxWorkerID()+1 {
		return nil, fmt.Errorf("%w: WorkerRange %s is not within the layout's worker IDs 0-%d", ErrInvalidConfig, wr, g.layout.MaxWorkerID())
	}
	if static >= 0 && cfg.WorkerRange != (WorkerRange{}) && (static < wr.From || static >= wr.To) {
		// The range keeps this process clear of worker IDs that other
		// generators hold outside the table; a static ID must stay in it.
		return nil, fmt.Errorf("%w: static worker ID %d is outside WorkerRange %s", ErrInvalidConfig, static, wr)
	}
	_, ranged := store.(RangeClaimer)
	if _, ok := store.(LayoutClaimer); wr.From > 0 && !ranged && !ok {
		return nil, fmt.Errorf("%w: WorkerRange %s needs a LeaseStore that implements RangeClaimer or LayoutClaimer", ErrInvalidConfig, wr)
	}
	g.Pause(fmt.Errorf("%w: no worker ID claimed yet", ErrNoWorkerLease))
	l := &Leased{
		g:          g,
		tagged:     Tagged{g: g},
		store:      store,
		static:     static,
		clock:      g.clock,
		owner:      cfg.Owner,
		workers:    wr,
		ttl:        cfg.TTL,
		renewEvery: cfg.RenewInterval,
		retryEvery: cfg.RetryInterval,
		margin:     cfg.Margin,
		release:    cfg.ReleaseTimeout,
		log:        cfg.Logger.With("owner", cfg.Owner),
		sem:        make(chan struct{}, 1),
		lease:      Lease{WorkerID: -1},
	}
	if err := l.claim(ctx); err != nil {
		return nil, err
	}
	if l.renewEvery > 0 {
		hctx, stop := context.WithCancel(context.Background())
		l.stop, l.done = stop, make(chan struct{})
		go l.run(hctx)
	}
	return l, nil
}

// run is the background heartbeat.
func (l *Leased) run(ctx context.Context) {
	defer close(l.done)
	timer := time.NewTimer(l.renewEvery)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		hctx, cancel := context.WithTimeout(ctx, l.renewEvery)
		err := l.Heartbeat(hctx)
		cancel()
		if err != nil {
			timer.Reset(l.retryEvery)
		} else {
			timer.Reset(l.renewEvery)
		}
	}
}

// now returns the clock's wall time, without a monotonic reading.
func (l *Leased) now() time.Time {
	wall, _ := l.clock.Now()
	return wall.Round(0)
}

func (l *Leased) acquire(ctx context.Context) error {
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Leased) unlock() { <-l.sem }

// Heartbeat does now what the background heartbeat does every
// RenewInterval: it renews the lease, recording the generator's
// LastTimestamp and moving its deadline forward; or, if the lease is lost
// or has expired, it claims a worker ID again and resumes the generator.
// Programs with a negative RenewInterval call it themselves, more often
// than TTL-Margin; it is safe to call concurrently with anything. ctx
// bounds the store calls.
//
// A failed renewal leaves the generator issuing until the lease's expiry
// less Margin. From then on, or as soon as the store reports ErrLeaseLost,
// the generator is paused with the cause. Heartbeat returns the failed
// call's error, and ErrClosed after Close.
func (l *Leased) Heartbeat(ctx context.Context) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.unlock()
	l.mu.Lock()
	closed, lease, held := l.closed, l.lease, l.held
	l.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: %w", ErrNoWorkerLease, ErrClosed)
	}

	if now := l.now(); lease.Owner != "" && now.Before(lease.ExpiresAt) {
		renewed, err := l.store.Renew(ctx, lease, now, l.g.LastTimestamp(), l.ttl)
		if err == nil {
			l.g.SetDeadline(renewed.ExpiresAt.Add(-l.margin))
			if !held {
				l.log.Info("snowflake: worker lease renewed after the deadline; resuming", "worker_id", renewed.WorkerID)
			}
			return l.adopt(renewed)
		}
		err = fmt.Errorf("snowflake: renew the lease on worker %d: %w", lease.WorkerID, err)
		lost := errors.Is(err, ErrLeaseLost)
		if !lost && l.now().Before(lease.ExpiresAt.Add(-l.margin)) {
			l.log.Warn("snowflake: worker lease renewal failed; retrying", "worker_id", lease.WorkerID,
				"expires_at", lease.ExpiresAt, "err", err)
			return err
		}
		if held {
			l.g.Pause(err)
			l.log.Error("snowflake: worker lease lost or expired; no IDs until a worker ID is claimed again",
				"worker_id", lease.WorkerID, "err", err)
		}
		l.mu.Lock()
		l.held = false
		if lost {
			l.lease = Lease{WorkerID: -1}
		}
		l.mu.Unlock()
		if !lost {
			// The store is failing; try the same lease again next time,
			// and claim another only once it has expired.
			return err
		}
	} else if held {
		// No heartbeat ran until after the expiry (a stalled process, a
		// suspended machine). The deadline has stopped the generator;
		// pausing it too keeps the old worker ID out of use while the
		// new deadline is set.
		err := fmt.Errorf("%w: the lease on worker %d expired at %s before it was renewed",
			ErrNoWorkerLease, lease.WorkerID, lease.ExpiresAt.Format(time.RFC3339Nano))
		l.g.Pause(err)
		l.log.Error("snowflake: worker lease expired; no IDs until a worker ID is claimed again", "worker_id", lease.WorkerID)
		l.mu.Lock()
		l.held = false
		l.mu.Unlock()
	}
	return l.claim(ctx)
}

// claim leases a worker ID and resumes the generator under it. The caller
// holds sem, or has not shared l yet, and the generator is paused: the
// new deadline must not let it issue under the old worker ID.
func (l *Leased) claim(ctx context.Context) error {
	var lease Lease
	var err error
	if lc, ok := l.store.(LayoutClaimer); ok {
		// The store then checks the layout against the table's, in the
		// same transaction as the claim.
		lease, err = lc.ClaimLayout(ctx, l.owner, l.now(), l.ttl, l.g.layout, l.workers, l.static)
	} else if l.static >= 0 {
		lease, err = l.store.(StaticLeaseStore).ClaimStatic(ctx, l.owner, l.static, l.now(), l.ttl)
	} else if rc, ok := l.store.(RangeClaimer); ok && l.workers.From > 0 {
		lease, err = rc.ClaimRange(ctx, l.owner, l.now(), l.ttl, l.workers.From, l.workers.To)
	} else {
		lease, err = l.store.Claim(ctx, l.owner, l.now(), l.ttl, l.workers.To)
	}
	if err != nil {
		err = fmt.Errorf("snowflake: claim a worker ID: %w", err)
		l.log.Warn("snowflake: worker ID claim failed", "err", err)
		return err
	}
	l.g.SetDeadline(lease.ExpiresAt.Add(-l.margin))
	if err := l.adopt(lease); err != nil {
		// Closed meanwhile, or the store handed out a worker ID outside
		// the layout (several layouts share the table). Hand it back
		// rather than hold it idle.
		_ = l.store.Release(ctx, lease, lease.LastTimestamp)
		return err
	}
	l.log.Info("snowflake: worker ID claimed", "worker_id", lease.WorkerID,
		"expires_at", lease.ExpiresAt, "last_timestamp", lease.LastTimestamp)
	return nil
}

// adopt makes lease the one the generator issues under, resuming it if
// it was paused, unless l has been closed meanwhile.
func (l *Leased) adopt(lease Lease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("%w: %w", ErrNoWorkerLease, ErrClosed)
	}
	if !l.held {
		// Resume under l.mu, so that Close, which sets closed first and
		// then pauses, always has the last word.
		if err := l.g.Resume(lease.WorkerID, lease.LastTimestamp); err != nil {
			return fmt.Errorf("snowflake: the lease store returned worker %d: %w", lease.WorkerID, err)
		}
	}
	l.lease, l.held = lease, true
	return nil
}

// Close stops the heartbeat and the generator, then releases the lease
// with the generator's final LastTimestamp, so that another process can
// claim the worker ID at once. Next then returns ErrClosed. It spends at
// most LeasedConfig.ReleaseTimeout on the release; if that fails, the
// lease simply expires after TTL. Close returns the release's error
// (ErrLeaseLost if the lease had been lost); calling it again returns
// nil. It is Shutdown with that timeout, as segment.Allocator's Close is.
//
// Call it after the last request that may issue IDs has finished and
// before the store is closed.
func (l *Leased) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.release)
	defer cancel()
	return l.Shutdown(ctx)
}

// Shutdown is Close with the release bounded by ctx instead of
// LeasedConfig.ReleaseTimeout.
func (l *Leased) Shutdown(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.g.Pause(ErrClosed)
	if l.stop != nil {
		l.stop()
		<-l.done
	}
	if err := l.acquire(ctx); err != nil {
		return fmt.Errorf("snowflake: release the worker lease: %w", err)
	}
	defer l.unlock()
	// Again: a heartbeat that was under way may have paused it with a
	// lease error since.
	l.g.Pause(ErrClosed)
	l.mu.Lock()
	lease := l.lease
	l.lease, l.held = Lease{WorkerID: -1}, false
	l.mu.Unlock()
	if lease.Owner == "" {
		return nil
	}
	// Paused above, so LastTimestamp is final.
	if err := l.store.Release(ctx, lease, l.g.LastTimestamp()); err != nil {
		return fmt.Errorf("snowflake: release the lease on worker %d: %w", lease.WorkerID, err)
	}
	l.log.Info("snowflake: worker lease released", "worker_id", lease.WorkerID)
	return nil
}

// Next returns a new ID, as Generator.Next does. The tag must be valid
// (idgen.CheckTag), but does not partition IDs. See Tagged.Next.
func (l *Leased) Next(ctx context.Context, tag string) (int64, error) {
	return l.tagged.Next(ctx, tag)
}

// NextN returns n new IDs in increasing order. See Tagged.NextN.
func (l *Leased) NextN(ctx context.Context, tag string, n int) ([]int64, error) {
	return l.tagged.NextN(ctx, tag, n)
}

// Ready returns nil if Next would issue an ID now, and otherwise the error
// it would return: ErrNoWorkerLease (with its cause) while no lease is
// held or the lease's deadline has passed, ErrClockMovedBackwards while
// the clock is further behind the last timestamp than MaxBackward allows,
// ErrTimeExhausted, or ErrClosed. It does no I/O, so a readiness probe
// can call it as often as it likes.
func (l *Leased) Ready() error { return l.g.check() }

// WorkerID returns the worker ID of the lease held, or -1 while none is.
func (l *Leased) WorkerID() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		return -1
	}
	return l.lease.WorkerID
}

// LeaseExpiry returns when the lease held expires unless renewed, or the
// zero Time while none is held. The generator stops issuing Margin
// earlier.
func (l *Leased) LeaseExpiry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		return time.Time{}
	}
	return l.lease.ExpiresAt
}

// LastTimestamp returns the generator's LastTimestamp: the millisecond of
// the last ID issued, or the floor it started from.
func (l *Leased) LastTimestamp() time.Time { return l.g.LastTimestamp() }

// Owner returns the name this process holds leases under.
func (l *Leased) Owner() string { return l.owner }

// Layout returns the layout of the IDs, with defaults filled in; its
// Decode splits them.
func (l *Leased) Layout() Layout { return l.g.layout }
