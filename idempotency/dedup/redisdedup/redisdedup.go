// Package redisdedup is consumer dedup (package dedup) over Redis, for
// consumers whose business write is not in a SQL database idgen's store
// shares: one Redis, Sentinel or Redis Cluster, through
// github.com/redis/go-redis/v9.
//
// A message's state is one Redis key. Do claims it in flight, with an
// owner token and an expiry (the hold), runs the handler while a
// watchdog renews the hold every third of it, and then sets the key to
// done, kept for the retention, with a compare-and-set on its owner.
// A handler that fails deletes its in-flight key, so that the
// redelivery runs; a consumer that dies leaves it to expire after one
// hold, after which a redelivery runs. A duplicate that arrives while
// the message is in flight gets dedup.ErrInFlight at once: it does not
// wait, and is left unacknowledged for the broker to deliver again.
//
// What Redis cannot give is a transaction shared with the handler's
// own writes: a consumer that dies after its handler's effect but
// before the compare-and-set leaves the message in flight, not done,
// and its redelivery runs the handler again once the hold expires. So
// the handler's effect must itself be idempotent, or the SQL stores
// used, whose record commits with the effect; see docs/dedup.md.
//
// Every script names one Redis key, so each runs in one hash slot of a
// cluster, and the messages of a group spread over its masters; there
// is no multi-key state that a hash tag would have to keep together.
// Redis must keep keys until they expire: New refuses any
// maxmemory-policy but noeviction, as the idempotency store does.
package redisdedup

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/idempotency/dedup"
	"github.com/idgen/idgen/internal/redispolicy"
)

// Defaults of Options.
const (
	DefaultPrefix    = "idgen:dedup:"
	DefaultHold      = 30 * time.Second
	DefaultRetention = dedup.DefaultRetention
)

// ErrEvictionPolicy refuses a Redis that may evict keys: an evicted
// "done" key lets a redelivery run its handler again.
var ErrEvictionPolicy = errors.New("redisdedup: Redis may evict dedup keys")

// Options configures a Deduper. Zero fields take the defaults.
type Options struct {
	// Prefix starts every key the Deduper writes. Default DefaultPrefix.
	Prefix string
	// Hold is how long a message stays in flight without a renewal: a
	// consumer that died blocks its redelivery this long. Do renews it
	// every third while the handler runs. Default DefaultHold, at least
	// 300ms.
	Hold time.Duration
	// Retention is how long a processed message's key is kept: a
	// redelivery within it is skipped. It must outlast every
	// redelivery the broker may make. Default DefaultRetention, at
	// least Hold.
	Retention time.Duration
	// Logger receives renewal failures. Default slog.Default().
	Logger *slog.Logger
}

// Deduper runs handlers at most once per message to completion, over
// Redis. It is safe for concurrent use, and starts goroutines only
// within Do.
type Deduper struct {
	rdb  redis.UniversalClient
	opts Options
}

// New checks opts, and that Redis (every shard of a cluster) keeps keys
// until they expire (maxmemory-policy noeviction), and returns a
// Deduper over rdb. ctx bounds that check. The caller owns rdb.
func New(ctx context.Context, rdb redis.UniversalClient, opts Options) (*Deduper, error) {
	if rdb == nil {
		return nil, errors.New("redisdedup: a Redis client is required")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Hold == 0 {
		opts.Hold = DefaultHold
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	switch {
	case opts.Hold < 300*time.Millisecond:
		return nil, fmt.Errorf("redisdedup: Hold %v is less than 300ms", opts.Hold)
	case opts.Retention < opts.Hold:
		return nil, fmt.Errorf("redisdedup: Retention %v is less than Hold %v", opts.Retention, opts.Hold)
	}
	if err := redispolicy.CheckNoEviction(ctx, rdb, redispolicy.Need{
		Err:  ErrEvictionPolicy,
		What: "dedup keys",
		Harm: "a redelivered message would then run again",
	}); err != nil {
		return nil, err
	}
	return &Deduper{rdb: rdb, opts: opts}, nil
}

// key is the Redis key of a message: the group's length first, so that
// no two (group, key) pairs share one.
func (d *Deduper) key(group, key string) string {
	return d.opts.Prefix + strconv.Itoa(len(group)) + ":" + group + ":" + key
}

// The key's values: "p:" and the owner token while in flight, doneValue
// once processed.
const (
	inFlightPrefix = "p:"
	doneValue      = "d"
)

// claimScript sets the key in flight for ARGV[1] for ARGV[2] ms if it
// is absent, and returns 0; else 1 if it is done, 2 if in flight.
var claimScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	return 0
end
if v == ARGV[3] then return 1 end
return 2`)

// renewScript moves the expiry of the key to ARGV[2] ms if ARGV[1] still
// holds it, and returns 1; else 0.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return 1
end
return 0`)

// doneScript sets the key done (ARGV[3]) for ARGV[2] ms if ARGV[1]
// still holds it, and returns 1; else 0.
var doneScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
	return 1
end
return 0`)

// abandonScript deletes the key if ARGV[1] still holds it.
var abandonScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('DEL', KEYS[1])
end
return 0`)

// finishTimeout bounds the compare-and-set at a handler's end, which
// runs even when the caller's context is done: the work is done, and
// recording it spares a redelivery.
const finishTimeout = 5 * time.Second

// Do runs fn at most once per group and key to completion:
//
//   - a message not seen is claimed in flight and fn runs; on fn's
//     success the message is set done, for Options.Retention, and Do
//     returns nil: the caller acknowledges it;
//   - fn's error frees the message and is returned as it is, so that
//     its redelivery runs fn again; a panic frees it and goes on;
//   - a message done returns dedup.ErrProcessed (acknowledge it), and
//     one in flight in another consumer dedup.ErrInFlight (do not: the
//     broker delivers it again), without running fn;
//   - a bad group or key returns dedup.ErrInvalidGroup or
//     dedup.ErrInvalidKey, a Redis failure dedup.ErrStore.
//
// While fn runs its hold is renewed every third of Options.Hold, so a
// slow fn keeps the message. If the hold is lost all the same (Redis
// unreachable for a whole hold, the key deleted), fn's context ends
// with cause dedup.ErrHoldLost, Do returns dedup.ErrHoldLost, and the
// message is not set done: a redelivery runs fn again.
func (d *Deduper) Do(ctx context.Context, group, key string, fn func(ctx context.Context) error) (err error) {
	if err := dedup.Check(group, key); err != nil {
		return err
	}
	k := d.key(group, key)
	owner := inFlightPrefix + rand.Text()
	hold := d.opts.Hold.Milliseconds()
	start := time.Now()
	state, err := claimScript.Run(ctx, d.rdb, []string{k}, owner, hold, doneValue).Int()
	switch {
	case err != nil:
		return fmt.Errorf("%w: claim %q in group %q: %w", dedup.ErrStore, key, group, err)
	case state == 1:
		return dedup.ErrProcessed
	case state == 2:
		return dedup.ErrInFlight
	}
	held, release := d.keep(ctx, k, owner, start.Add(d.opts.Hold))
	ran := false
	defer func() {
		if !ran { // fn panicked
			release()
			d.abandon(ctx, k, owner)
		}
	}()
	ferr := fn(held)
	ran = true
	lost := release()
	if ferr != nil {
		d.abandon(ctx, k, owner)
		return ferr
	}
	if lost {
		return dedup.ErrHoldLost
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	ok, err := doneScript.Run(fctx, d.rdb, []string{k}, owner, d.opts.Retention.Milliseconds(), doneValue).Bool()
	switch {
	case err != nil:
		// The key stays in flight until its hold expires; then a
		// redelivery runs fn again.
		return fmt.Errorf("%w: mark %q in group %q done: %w", dedup.ErrStore, key, group, err)
	case !ok:
		return dedup.ErrHoldLost
	}
	return nil
}

// abandon frees a message whose fn failed, so that its redelivery runs
// at once rather than after the hold; if it cannot, the hold expires.
func (d *Deduper) abandon(ctx context.Context, k, owner string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := abandonScript.Run(actx, d.rdb, []string{k}, owner).Err(); err != nil {
		d.opts.Logger.Warn("redisdedup: could not free a failed message; its redelivery waits for the hold to expire",
			"hold", d.opts.Hold, "err", err)
	}
}

// keep renews the hold on k until release, which waits for the
// renewals to end, so that none races the final compare-and-set, and
// reports whether the hold was lost. The context it returns ends with
// cause dedup.ErrHoldLost when the hold is lost. until is when the hold
// lapses by the local clock, counted from before the claim.
func (d *Deduper) keep(ctx context.Context, k, owner string, until time.Time) (held context.Context, release func() bool) {
	held, lose := context.WithCancelCause(ctx)
	life, end := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	lost := false
	go func() {
		defer close(done)
		if d.renewUntilLost(life, k, owner, until) {
			lost = true
			lose(dedup.ErrHoldLost)
		}
	}()
	return held, func() bool {
		end()
		<-done
		lose(context.Canceled)
		return lost
	}
}

// renewUntilLost renews the hold every third of Hold until life ends
// (false) or the hold is lost (true): a renewal finds the key no longer
// owner's, or none succeeds before the hold lapses.
func (d *Deduper) renewUntilLost(life context.Context, k, owner string, until time.Time) bool {
	every := d.opts.Hold / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		lapse := time.NewTimer(time.Until(until))
		select {
		case <-life.Done():
			lapse.Stop()
			return false
		case <-lapse.C:
			return true
		case <-t.C:
			lapse.Stop()
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(life, time.Until(until))
		ok, err := renewScript.Run(rctx, d.rdb, []string{k}, owner, d.opts.Hold.Milliseconds()).Bool()
		cancel()
		switch {
		case life.Err() != nil:
			return false
		case err != nil:
			// The hold still runs: try again at the next tick, and give
			// up when it lapses.
			d.opts.Logger.Warn("redisdedup: could not renew a message's hold; the handler is stopped if it lapses",
				"hold", d.opts.Hold, "err", err)
		case !ok:
			return true
		default:
			until = sent.Add(d.opts.Hold)
		}
	}
}
