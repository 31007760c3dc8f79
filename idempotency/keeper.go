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
	// The winner's allocation is bounded by it too.
	LockTimeout time.Duration
	// MaxKeys caps the live keys of one scope; past it, new keys get
	// ErrKeyLimit. Negative: no cap. The cap is enforced from counts
	// taken at each sweep plus the keys this process added since, so
	// other instances' new keys count from the next sweep on.
	MaxKeys int64
	// SweepEvery is the period of Start's sweeps.
	SweepEvery time.Duration
	// SweepBatch bounds the rows one sweep statement deletes; a sweep
	// runs at most sweepRounds of them.
	SweepBatch int
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
	// is the number of live keys it counted after (-1 if it failed).
	Swept(n int, live int64, err error)
}

// sweepRounds bounds the statements of one sweep, so that a backlog
// (after an outage of the sweeper) is worked off over several periods
// rather than in one long burst of deletes.
const sweepRounds = 10

// Keeper runs the protocol over a Store. It is safe for concurrent use.
type Keeper struct {
	st  Store
	cfg Config

	mu     sync.Mutex
	counts map[string]int64         // live keys by scope at the last sweep
	added  map[string]*atomic.Int64 // keys this process added since

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
	case cfg.LockTimeout < time.Second:
		return nil, errors.New("idempotency: LockTimeout must be at least 1s")
	case cfg.SweepEvery < time.Second || cfg.SweepBatch < 1:
		return nil, errors.New("idempotency: SweepEvery must be at least 1s and SweepBatch at least 1")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Keeper{st: st, cfg: cfg, counts: map[string]int64{}, added: map[string]*atomic.Int64{}}, nil
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

// beginTries bounds Begin's loop: each turn follows a row that changed
// under it (deleted, taken over), which takes a sweep or another
// request's failure in between.
const beginTries = 4

// Begin decides a keyed request. It returns a Ticket when the request
// must allocate, the Answer to replay for a repeat, or an error:
// ErrKeyReused, an *InFlightError, ErrKeyLimit or ErrStore.
func (k *Keeper) Begin(ctx context.Context, r Request) (*Ticket, *Answer, error) {
	ttl := r.TTL
	if ttl == 0 {
		ttl = k.cfg.TTL
	}
	now := k.cfg.Now()
	rec := Record{Scope: r.Scope, Key: r.Key, Fingerprint: r.Fingerprint, Owner: rand.Text(),
		LockedUntil: now.Add(k.cfg.LockTimeout), ExpiresAt: now.Add(ttl)}
	for range beginTries {
		if !k.underCap(r.Scope) {
			// Full: only a repeat of a live key may go on.
			cur, found, err := k.st.Get(ctx, r.Scope, r.Key)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %w", ErrStore, err)
			}
			if !found || takeable(cur, now) {
				k.conflict("limit")
				return nil, nil, fmt.Errorf("%w: %d live keys", ErrKeyLimit, k.cfg.MaxKeys)
			}
			return k.decide(cur, r.Fingerprint, now)
		}
		won, err := k.st.Insert(ctx, rec)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrStore, err)
		}
		if won {
			a := k.addedTo(r.Scope)
			a.Add(1)
			return &Ticket{k: k, rec: rec, added: a}, nil, nil
		}
		cur, found, err := k.st.Get(ctx, r.Scope, r.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrStore, err)
		}
		if !found {
			continue // deleted since the insert: try again
		}
		if takeable(cur, now) {
			won, err := k.st.TakeOver(ctx, rec, cur.Owner, now)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %w", ErrStore, err)
			}
			if won {
				return &Ticket{k: k, rec: rec}, nil, nil
			}
			continue
		}
		return k.decide(cur, r.Fingerprint, now)
	}
	k.conflict("in_flight")
	return nil, nil, &InFlightError{Wait: time.Second}
}

// decide answers a repeat from the live row cur.
func (k *Keeper) decide(cur Record, fp string, now time.Time) (*Ticket, *Answer, error) {
	switch {
	case cur.Fingerprint != fp:
		k.conflict("reused")
		return nil, nil, ErrKeyReused
	case cur.Status == 0:
		k.conflict("in_flight")
		return nil, nil, &InFlightError{Wait: cur.LockedUntil.Sub(now)}
	}
	if o := k.cfg.Observer; o != nil {
		o.Replayed()
	}
	return nil, &Answer{Status: cur.Status, ContentType: cur.ContentType, Body: cur.Body}, nil
}

func (k *Keeper) conflict(reason string) {
	if o := k.cfg.Observer; o != nil {
		o.Conflict(reason)
	}
}

// Deadline is when the ticket's lock expires: an allocation still
// running then may lose the key to a retry, so it should give up.
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
	_, ans, err := t.k.decide(cur, r.Fingerprint, now)
	if err != nil {
		return Answer{}, false, err
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

func (k *Keeper) underCap(scope string) bool {
	if k.cfg.MaxKeys < 0 {
		return true
	}
	k.mu.Lock()
	n := k.counts[scope]
	a := k.added[scope]
	k.mu.Unlock()
	if a != nil {
		n += a.Load()
	}
	return n < k.cfg.MaxKeys
}

func (k *Keeper) addedTo(scope string) *atomic.Int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	a := k.added[scope]
	if a == nil {
		a = new(atomic.Int64)
		k.added[scope] = a
	}
	return a
}

// Sweep deletes expired keys, in batches of Config.SweepBatch and at
// most sweepRounds batches, then recounts the live keys of each scope
// for the cap. Start runs it every Config.SweepEvery; tests call it with
// a fake clock.
func (k *Keeper) Sweep(ctx context.Context) (int, error) {
	now := k.cfg.Now()
	total := 0
	var err error
	for range sweepRounds {
		var n int
		if n, err = k.st.Sweep(ctx, now, k.cfg.SweepBatch); err != nil {
			break
		}
		total += n
		if n < k.cfg.SweepBatch {
			break
		}
	}
	live := int64(-1)
	if err == nil {
		var counts map[string]int64
		if counts, err = k.st.Count(ctx, now); err == nil {
			live = 0
			for _, n := range counts {
				live += n
			}
			// Keys added while Count ran are counted twice until the next
			// sweep: the cap errs on the safe side.
			k.mu.Lock()
			k.counts = counts
			k.added = map[string]*atomic.Int64{}
			k.mu.Unlock()
		}
	}
	if o := k.cfg.Observer; o != nil {
		o.Swept(total, live, err)
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
