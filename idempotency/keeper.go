package idempotency

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// AnonymousScope is the one scope of callers without a token, on a
// server that requires none.
const AnonymousScope = "anonymous"

// Defaults of Config.
const (
	DefaultTTL         = 24 * time.Hour
	DefaultMaxTTL      = 7 * 24 * time.Hour
	DefaultLockTimeout = 10 * time.Second
	DefaultMaxKeys     = 1_000_000
	DefaultSweepEvery  = time.Minute
	DefaultSweepBatch  = 1000
	// DefaultInFlightWait is how long a repeat waits for the first
	// request of its key before it answers ErrInFlight: most first
	// requests finish in milliseconds, so the repeat gets the replay
	// rather than a 409 and a second round trip.
	DefaultInFlightWait = 500 * time.Millisecond
	// CeilingTTL is the most any TTL or MaxTTL may be: a key kept
	// longer than a week outlives any retry worth answering, and only
	// fills the store (the IETF draft's examples and common practice
	// keep keys 24 hours to 7 days).
	CeilingTTL = 7 * 24 * time.Hour
)

// Config configures a Keeper. Zero fields take the defaults.
type Config struct {
	// TTL is how long a key is kept when the request does not say.
	TTL time.Duration
	// MaxTTL bounds the TTL a request may ask for.
	MaxTTL time.Duration
	// LockTimeout is how long a first request holds its key: a repeat
	// meanwhile gets ErrInFlight, and once it passes a repeat may take
	// the key over, so a crashed instance blocks its callers no longer.
	// Do renews the hold of a request that runs every third of it.
	LockTimeout time.Duration
	// MaxKeys caps the live keys of one scope; past it, new keys get a
	// *KeyLimitError (ErrKeyLimit). Negative: no cap. The cap is kept
	// from a count of the scope's live keys plus the keys this process
	// added since. That count is taken at each sweep, again whenever
	// the estimate crosses half the headroom left (so that the keys of
	// other instances sharing the store are seen before the cap, not a
	// sweep later), and always before a scope is refused, so that keys
	// expired since the last count never keep a caller out.
	MaxKeys int64
	// SweepEvery is the period of Start's sweeps.
	SweepEvery time.Duration
	// SweepBatch bounds the rows one sweep statement deletes. A sweep
	// runs statements while they come back full, within SweepBudget.
	SweepBatch int
	// SweepBudget bounds the time of one sweep: a backlog larger than a
	// sweep can delete in it is worked off over the next sweeps, and
	// the expired rows left are reported to the Observer. Default half
	// of SweepEvery.
	SweepBudget time.Duration
	// InFlightWait is how long a repeat of a key in flight waits for
	// the first request to finish before it gets ErrInFlight. Default
	// DefaultInFlightWait; negative: no wait.
	InFlightWait time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Observer is told of stored keys, replays, conflicts and sweeps.
	Observer Observer
	// Logger receives sweep failures. Default slog.Default().
	Logger *slog.Logger
}

// Observer receives the Keeper's events. Methods must not block.
type Observer interface {
	// KeyStored: a winner recorded its answer.
	KeyStored()
	// Replayed: a repeat got the recorded answer.
	Replayed()
	// Conflict: a request was refused; reason is "reused", "in_flight"
	// or "limit".
	Conflict(reason string)
	// Swept: a sweep deleted n expired keys, or failed with err; live
	// and expired are the rows it counted after, all callers (-1 if it
	// failed): expired rows left are a backlog the sweeps have not
	// worked off, which a sweep within its budget leaves at 0.
	Swept(n int, live, expired int64, err error)
}

// Keeper runs the protocol over a Store. It is safe for concurrent use.
type Keeper struct {
	st  Store
	cfg Config

	mu     sync.Mutex
	scopes map[string]*scopeCount // the cap's estimate, by scope

	startOnce sync.Once
	cancel    context.CancelFunc // set by Start
	done      chan struct{}      // closed when the sweep loop ends
}

// New checks cfg and returns a Keeper over st. Call Start to sweep.
func New(st Store, cfg Config) (*Keeper, error) {
	if st == nil {
		return nil, errors.New("idempotency: a Store is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.TTL, DefaultTTL)
	def(&cfg.MaxTTL, DefaultMaxTTL)
	def(&cfg.LockTimeout, DefaultLockTimeout)
	def(&cfg.SweepEvery, DefaultSweepEvery)
	def(&cfg.SweepBudget, cfg.SweepEvery/2)
	def(&cfg.InFlightWait, DefaultInFlightWait)
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.SweepBatch == 0 {
		cfg.SweepBatch = DefaultSweepBatch
	}
	switch {
	case cfg.TTL < time.Second || cfg.MaxTTL < time.Second:
		return nil, errors.New("idempotency: TTL and MaxTTL must be at least 1s")
	case cfg.TTL > cfg.MaxTTL:
		return nil, fmt.Errorf("idempotency: TTL %v is above MaxTTL %v", cfg.TTL, cfg.MaxTTL)
	case cfg.MaxTTL > CeilingTTL:
		return nil, fmt.Errorf("idempotency: MaxTTL %v is above the ceiling of %v; keys are for retries, not for records", cfg.MaxTTL, CeilingTTL)
	case cfg.LockTimeout < time.Second:
		return nil, errors.New("idempotency: LockTimeout must be at least 1s")
	case cfg.SweepEvery < time.Second || cfg.SweepBatch < 1 || cfg.SweepBudget < 0:
		return nil, errors.New("idempotency: SweepEvery must be at least 1s, SweepBatch at least 1 and SweepBudget not negative")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Keeper{st: st, cfg: cfg, scopes: map[string]*scopeCount{}}, nil
}

// ParseTTL reads a request's TTL header against the Keeper's default
// and max.
func (k *Keeper) ParseTTL(v string) (time.Duration, error) {
	return ParseTTL(v, k.cfg.TTL, k.cfg.MaxTTL)
}

// LockTimeout returns Config.LockTimeout.
func (k *Keeper) LockTimeout() time.Duration { return k.cfg.LockTimeout }

// Request is what Begin needs of a keyed request.
type Request struct {
	Scope, Key, Fingerprint string
	// TTL is the key's lifetime; 0 takes Config.TTL.
	TTL time.Duration
}

// Answer is a recorded answer.
type Answer struct {
	Status      int
	ContentType string
	Body        []byte
}

// Ticket is the winner's hold on a key: it must Complete or Abandon it.
type Ticket struct {
	k   *Keeper
	rec Record
	// added is the scope's counter this ticket's insert raised, nil after
	// a takeover (the row was counted already). Abandon lowers it, so that
	// a failed first request does not hold a slot of the cap until the
	// next sweep; a sweep in between swaps the counter out, and lowering
	// the old one is then harmless.
	added *atomic.Int64
}

// beginTries bounds the turns of Begin that follow a row that changed
// under them (deleted, taken over), which takes a sweep or another
// request's failure in between.
const beginTries = 4

// maxPoll bounds the pause between two looks at a key in flight.
const maxPoll = 100 * time.Millisecond

// Begin decides a keyed request. It returns a Ticket when the request
// must allocate, the Answer to replay for a repeat, or an error:
// ErrKeyReused, an *InFlightError, a *KeyLimitError or ErrStore. A
// repeat of a key in flight waits up to Config.InFlightWait for the
// first request's answer, looking again at growing intervals. Do runs
// Begin, the work and its end, and renews the hold meanwhile, which a
// Ticket alone does not.
func (k *Keeper) Begin(ctx context.Context, r Request) (*Ticket, *Answer, error) {
	ttl := r.TTL
	if ttl == 0 {
		ttl = k.cfg.TTL
	}
	now := k.cfg.Now()
	rec := Record{Scope: r.Scope, Key: r.Key, Fingerprint: r.Fingerprint, Owner: rand.Text(),
		LockedUntil: now.Add(k.cfg.LockTimeout), ExpiresAt: now.Add(ttl)}
	var waited time.Duration
	pause := 2 * time.Millisecond
	for changed := 0; ; {
		tk, ans, busy, err := k.turn(ctx, rec, now)
		switch {
		case errors.Is(err, errChanged):
			if changed++; changed < beginTries {
				continue
			}
			k.conflict("in_flight")
			return nil, nil, &InFlightError{Wait: time.Second}
		case busy == nil:
			return tk, ans, err
		}
		if waited >= k.cfg.InFlightWait {
			k.conflict("in_flight")
			return nil, nil, &InFlightError{Wait: k.inFlightWait(*busy, now)}
		}
		p := min(pause, k.cfg.InFlightWait-waited)
		t := time.NewTimer(p)
		select {
		case <-ctx.Done():
			t.Stop()
			k.conflict("in_flight")
			return nil, nil, &InFlightError{Wait: k.inFlightWait(*busy, now)}
		case <-t.C:
		}
		waited += p
		pause = min(2*pause, maxPoll)
		now = k.cfg.Now()
	}
}

// errChanged is a turn of Begin that saw the row change under it.
var errChanged = errors.New("idempotency: the row changed; look again")

// turn is one look of Begin at the key: a Ticket, an Answer, an error,
// or busy, the row of the same request in flight, to wait for.
func (k *Keeper) turn(ctx context.Context, rec Record, now time.Time) (tk *Ticket, ans *Answer, busy *Record, err error) {
	if err := k.underCap(ctx, rec.Scope, now); err != nil {
		// Full (or uncountable): only a repeat of a live key may go on.
		cur, found, gerr := k.st.Get(ctx, rec.Scope, rec.Key)
		switch {
		case gerr != nil:
			return nil, nil, nil, fmt.Errorf("%w: %w", ErrStore, gerr)
		case !found || takeable(cur, now):
			if errors.Is(err, ErrKeyLimit) {
				k.conflict("limit")
			}
			return nil, nil, nil, err
		}
		return k.decide(cur, rec.Fingerprint)
	}
	won, err := k.st.Insert(ctx, rec)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrStore, err)
	}
	if won {
		a := k.addedTo(rec.Scope)
		a.Add(1)
		return &Ticket{k: k, rec: rec, added: a}, nil, nil, nil
	}
	cur, found, err := k.st.Get(ctx, rec.Scope, rec.Key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrStore, err)
	}
	if !found {
		return nil, nil, nil, errChanged // deleted since the insert
	}
	if takeable(cur, now) {
		won, err := k.st.TakeOver(ctx, rec, cur.Owner, now)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: %w", ErrStore, err)
		}
		if won {
			return &Ticket{k: k, rec: rec}, nil, nil, nil
		}
		return nil, nil, nil, errChanged
	}
	return k.decide(cur, rec.Fingerprint)
}

// decide answers a repeat from the live row cur: the answer, a refusal,
// or busy when the same request is in flight.
func (k *Keeper) decide(cur Record, fp string) (tk *Ticket, ans *Answer, busy *Record, err error) {
	switch {
	case cur.Fingerprint != fp:
		k.conflict("reused")
		return nil, nil, nil, ErrKeyReused
	case cur.Status == 0:
		return nil, nil, &cur, nil
	}
	if o := k.cfg.Observer; o != nil {
		o.Replayed()
	}
	return nil, &Answer{Status: cur.Status, ContentType: cur.ContentType, Body: cur.Body}, nil, nil
}

// inFlightWait is the wait to announce for a repeat of cur, in flight
// at now: about as long as the first request has run so far (a request
// that took 3 s is likely to take a few more), at least a second (the
// header counts whole seconds), and never past the lock's expiry, when a
// retry takes the key over.
func (k *Keeper) inFlightWait(cur Record, now time.Time) time.Duration {
	left := cur.LockedUntil.Sub(now)
	age := now.Sub(cur.LockedUntil.Add(-k.cfg.LockTimeout))
	return max(min(max(age, time.Second), left), time.Second)
}

func (k *Keeper) conflict(reason string) {
	if o := k.cfg.Observer; o != nil {
		o.Conflict(reason)
	}
}

// Deadline is when the ticket's lock expires, as Begin took it: an
// allocation still running then may lose the key to a retry, so it
// should give up. Do renews the lock instead.
func (t *Ticket) Deadline() time.Time { return t.rec.LockedUntil }

// Complete records a as the key's answer. If the key was taken over
// meanwhile (this request outlived its lock), it returns what the row
// holds instead, with replayed true, or the error a repeat would get:
// the IDs this request allocated are then never handed out. A store
// error leaves the key in flight until its lock expires, so that no
// retry can allocate while the answer may have been recorded.
func (t *Ticket) Complete(ctx context.Context, a Answer) (out Answer, replayed bool, err error) {
	r := t.rec
	ok, err := t.k.st.Complete(ctx, r.Scope, r.Key, r.Owner, a.Status, a.ContentType, a.Body)
	if err != nil {
		return Answer{}, false, fmt.Errorf("%w: %w", ErrStore, err)
	}
	if ok {
		if o := t.k.cfg.Observer; o != nil {
			o.KeyStored()
		}
		return a, false, nil
	}
	cur, found, err := t.k.st.Get(ctx, r.Scope, r.Key)
	if err != nil {
		return Answer{}, false, fmt.Errorf("%w: %w", ErrStore, err)
	}
	now := t.k.cfg.Now()
	if !found || takeable(cur, now) {
		t.k.conflict("in_flight")
		return Answer{}, false, &InFlightError{Wait: time.Second}
	}
	_, ans, busy, err := t.k.decide(cur, r.Fingerprint)
	switch {
	case err != nil:
		return Answer{}, false, err
	case busy != nil:
		t.k.conflict("in_flight")
		return Answer{}, false, &InFlightError{Wait: t.k.inFlightWait(*busy, now)}
	}
	return *ans, true, nil
}

// Abandon removes the placeholder, so that a retry may allocate: for a
// request that failed before it had an answer worth keeping. It runs
// even when ctx is done, since a cancelled request is the usual cause.
func (t *Ticket) Abandon(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	r := t.rec
	if err := t.k.st.Delete(ctx, r.Scope, r.Key, r.Owner); err != nil {
		// The lock expires by itself; until then retries get 409.
		t.k.cfg.Logger.Warn("idempotency: could not release a key; retries wait for its lock to expire",
			"lock_timeout", t.k.cfg.LockTimeout, "err", err)
		return
	}
	if t.added != nil {
		t.added.Add(-1)
		t.added = nil
	}
}

// Sweep deletes expired keys, in statements of Config.SweepBatch rows
// for as long as they come back full and Config.SweepBudget lasts, then
// counts the live keys of each scope for the cap and the expired rows
// left. Start runs it every Config.SweepEvery; tests call it with a
// fake clock.
func (k *Keeper) Sweep(ctx context.Context) (int, error) {
	now := k.cfg.Now()
	total := 0
	var err error
	for {
		var n int
		if n, err = k.st.Sweep(ctx, now, k.cfg.SweepBatch); err != nil {
			break
		}
		total += n
		if n < k.cfg.SweepBatch || k.cfg.Now().Sub(now) >= k.cfg.SweepBudget {
			break
		}
	}
	live, expired := int64(-1), int64(-1)
	if err == nil {
		var counts map[string]int64
		if counts, err = k.st.Count(ctx, now); err == nil {
			live = 0
			for _, n := range counts {
				live += n
			}
			k.recounted(counts)
			expired, err = k.st.CountExpired(ctx, now)
			if err != nil {
				expired = -1
			}
		}
	}
	if o := k.cfg.Observer; o != nil {
		o.Swept(total, live, expired, err)
	}
	if err != nil {
		return total, fmt.Errorf("%w: sweep: %w", ErrStore, err)
	}
	return total, nil
}

// Start sweeps at once and then every Config.SweepEvery, in one
// goroutine, until Close. It starts that goroutine once, however often
// it is called.
func (k *Keeper) Start() {
	k.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		k.cancel = cancel
		k.done = make(chan struct{})
		go k.sweepLoop(ctx)
	})
}

func (k *Keeper) sweepLoop(ctx context.Context) {
	defer close(k.done)
	t := time.NewTicker(k.cfg.SweepEvery)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, k.cfg.SweepEvery)
		if _, err := k.Sweep(sctx); err != nil && ctx.Err() == nil {
			k.cfg.Logger.Warn("idempotency: sweep failed; expired keys stay until the next one", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close stops the sweeps Start began and waits for the last to end.
func (k *Keeper) Close() error {
	k.startOnce.Do(func() {}) // no Start after Close
	if k.cancel != nil {
		k.cancel()
		<-k.done
	}
	return nil
}
