package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Bounds of a group and a message key, in bytes: the columns of the
// SQL stores are this wide.
const (
	MaxGroupLen = 100
	MaxKeyLen   = 255
)

// Defaults of Config.
const (
	DefaultRetention  = 7 * 24 * time.Hour
	DefaultSweepEvery = time.Minute
	DefaultSweepBatch = 1000
)

// Errors of Do that are about the message, not a failure.
var (
	// ErrProcessed is returned by Do when the message's record exists:
	// it was processed to completion, and its handler did not run. The
	// caller acknowledges the message; its transaction holds no write of
	// Do's, so it may commit or roll back.
	ErrProcessed = errors.New("dedup: message already processed")
	// ErrInFlight is returned by redisdedup's Do when another consumer
	// holds the message: the caller does not acknowledge it, and the
	// broker delivers it again later. The SQL stores never return it:
	// there a duplicate waits.
	ErrInFlight = errors.New("dedup: message in flight in another consumer")
	// ErrHoldLost is the cause (context.Cause) of the end of a
	// redisdedup handler's context when its hold on the message lapsed
	// or was taken, and Do's error then: the message was not marked
	// processed, and a redelivery runs it again.
	ErrHoldLost = errors.New("dedup: the consumer lost its hold on the message")
)

// Errors of a bad group or key, returned before any I/O.
var (
	// ErrInvalidGroup is returned for an empty group, one longer than
	// MaxGroupLen bytes, or one that is not UTF-8 without NUL bytes.
	ErrInvalidGroup = errors.New("dedup: invalid group")
	// ErrInvalidKey is returned for an empty message key, one longer
	// than MaxKeyLen bytes, or one that is not UTF-8 without NUL bytes.
	ErrInvalidKey = errors.New("dedup: invalid message key")
)

// ErrStore wraps a store's failure: the message's fate is unknown to
// the caller, who rolls back and does not acknowledge it.
var ErrStore = errors.New("dedup: store failed")

// Check returns ErrInvalidGroup or ErrInvalidKey, with the reason, if
// group or key cannot be recorded; nil otherwise. Every backend
// compares them byte for byte.
func Check(group, key string) error {
	if why := check(group, MaxGroupLen); why != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidGroup, clip(group), why)
	}
	if why := check(key, MaxKeyLen); why != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidKey, clip(key), why)
	}
	return nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// check returns why s is no valid group or key, or "".
func check(s string, limit int) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > limit:
		return fmt.Sprintf("%d bytes, more than %d", len(s), limit)
	case !utf8.ValidString(s):
		return "not UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		// PostgreSQL's text refuses NUL.
		return "contains a NUL byte"
	}
	return ""
}

// Tx is the caller's transaction, in which Do writes the record:
// *sql.Tx satisfies it. Do's statement must be the first write of the
// transaction on SQLite (see Deduper.Do).
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Store keeps the records of the SQL backends: store.Store.Dedup.
type Store interface {
	// Mark inserts the record of group and key in tx, to be kept until
	// expiresAt, unless one exists, and reports whether it did. A
	// record inserted by a transaction still open makes it wait for
	// that transaction's end.
	Mark(ctx context.Context, tx Tx, group, key string, expiresAt time.Time) (bool, error)
	// Sweep deletes up to limit records whose expiry is at or before
	// now, outside any caller's transaction, and returns how many.
	Sweep(ctx context.Context, now time.Time, limit int) (int, error)
}

// Config configures a Deduper. Zero fields take the defaults.
type Config struct {
	// Retention is how long a record is kept at least: a redelivery
	// within it is skipped, one after the sweep removed the record runs
	// again. It must outlast every redelivery the broker may make
	// (Kafka's retention, a stream's trimming, a dead-letter policy).
	// Default DefaultRetention.
	Retention time.Duration
	// SweepEvery is the period of Start's sweeps. Default
	// DefaultSweepEvery, at least 1s.
	SweepEvery time.Duration
	// SweepBatch bounds the records one sweep statement deletes; a
	// sweep runs statements while they come back full. Default
	// DefaultSweepBatch.
	SweepBatch int
	// Now is the clock of expiries. Default time.Now.
	Now func() time.Time
	// Logger receives the failures of Start's sweeps. Default
	// slog.Default().
	Logger *slog.Logger
}

// Deduper runs handlers at most once per message over a Store. It is
// safe for concurrent use.
type Deduper struct {
	st  Store
	cfg Config

	startOnce sync.Once
	cancel    context.CancelFunc // set by Start
	done      chan struct{}      // closed when the sweep loop ends
}

// New checks cfg and returns a Deduper over st. It does no I/O; call
// Start to sweep.
func New(st Store, cfg Config) (*Deduper, error) {
	if st == nil {
		return nil, errors.New("dedup: a Store is required")
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.SweepEvery == 0 {
		cfg.SweepEvery = DefaultSweepEvery
	}
	if cfg.SweepBatch == 0 {
		cfg.SweepBatch = DefaultSweepBatch
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.Retention < time.Second:
		return nil, fmt.Errorf("dedup: Retention %v is less than 1s", cfg.Retention)
	case cfg.SweepEvery < time.Second:
		return nil, fmt.Errorf("dedup: SweepEvery %v is less than 1s", cfg.SweepEvery)
	case cfg.SweepBatch < 1:
		return nil, fmt.Errorf("dedup: SweepBatch %d is less than 1", cfg.SweepBatch)
	}
	return &Deduper{st: st, cfg: cfg}, nil
}

// Do runs fn at most once per group and key to completion, with the
// record of the message written in tx, the caller's transaction, which
// fn's business writes use too:
//
//   - Do inserts the record first, then runs fn; fn's error is returned
//     as it is, and the caller rolls tx back, which removes the record,
//     so that the message's redelivery runs fn again;
//   - fn's success is returned as nil: the caller commits tx, record and
//     business writes together, and then acknowledges the message;
//   - a message whose record exists returns ErrProcessed, and fn does
//     not run;
//   - a duplicate whose first delivery is in another transaction still
//     open waits for it (ctx bounds the wait, as do the database's lock
//     timeout and deadlock detection, whose errors are returned wrapped
//     in ErrStore: roll back and retry later);
//   - a bad group or key returns ErrInvalidGroup or ErrInvalidKey before
//     any statement, and a store failure ErrStore.
//
// On SQLite the insert must be the transaction's first statement, or
// the transaction begun with BEGIN IMMEDIATE (store.Store.DB's are):
// a deferred transaction that read first cannot wait for the write
// lock, and fails with SQLITE_BUSY instead.
//
// On PostgreSQL at REPEATABLE READ or SERIALIZABLE, a duplicate whose
// first commits while it waits fails with a serialization error rather
// than ErrProcessed; READ COMMITTED, the default, gets ErrProcessed.
func (d *Deduper) Do(ctx context.Context, tx Tx, group, key string, fn func(ctx context.Context) error) error {
	if err := Check(group, key); err != nil {
		return err
	}
	if tx == nil {
		return errors.New("dedup: Do needs the caller's transaction")
	}
	ok, err := d.st.Mark(ctx, tx, group, key, d.cfg.Now().Add(d.cfg.Retention))
	switch {
	case err != nil:
		return fmt.Errorf("%w: mark %q in group %q: %w", ErrStore, clip(key), group, err)
	case !ok:
		return ErrProcessed
	}
	return fn(ctx)
}

// Sweep deletes the records whose retention ended, in statements of
// Config.SweepBatch records for as long as they come back full, and
// returns how many it deleted. Start runs it every Config.SweepEvery;
// tests call it with a fake clock.
func (d *Deduper) Sweep(ctx context.Context) (int, error) {
	now := d.cfg.Now()
	total := 0
	for {
		n, err := d.st.Sweep(ctx, now, d.cfg.SweepBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("%w: sweep: %w", ErrStore, err)
		}
		if n < d.cfg.SweepBatch {
			return total, nil
		}
	}
}

// Start sweeps at once and then every Config.SweepEvery, in one
// goroutine, until Close. It starts that goroutine once, however often
// it is called.
func (d *Deduper) Start() {
	d.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		d.cancel = cancel
		d.done = make(chan struct{})
		go d.sweepLoop(ctx)
	})
}

func (d *Deduper) sweepLoop(ctx context.Context) {
	defer close(d.done)
	t := time.NewTicker(d.cfg.SweepEvery)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, d.cfg.SweepEvery)
		if _, err := d.Sweep(sctx); err != nil && ctx.Err() == nil {
			d.cfg.Logger.Warn("dedup: sweep failed; old records stay until the next one", "err", err)
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
func (d *Deduper) Close() error {
	d.startOnce.Do(func() {}) // no Start after Close
	if d.cancel != nil {
		d.cancel()
		<-d.done
	}
	return nil
}
