package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/internal/redispolicy"
	"github.com/idgen/idgen/lock"
)

// DefaultPrefix starts every Redis key the store writes.
const DefaultPrefix = "lock:"

// Options configure a Store. The zero value of every field selects the
// default written next to it.
type Options struct {
	// Prefix starts every key and channel the store uses; it may not
	// contain '{' or '}', which would move the hash tag. Zero means
	// DefaultPrefix.
	Prefix string
	// Retain is how long a lock's hash, and with it the name's last
	// token, outlives the lock's last grant or renewal. Past it the key
	// is gone and the next token comes from the clock alone (see the
	// package doc). Zero means an hour.
	Retain time.Duration
	// WaiterTTL is how long a waiter stays queued without renewing its
	// place: a waiter that died is skipped this long after its last
	// renewal. A waiter renews at a third of it. Zero means 2s.
	WaiterTTL time.Duration
	// Replicas, if above zero, makes every grant wait (Redis WAIT) until
	// that many replicas acknowledged it, for at most ReplicaTimeout;
	// otherwise the grant is undone and Acquire returns an error
	// wrapping ErrNotReplicated. Zero means not to wait. It needs a
	// *redis.Client (also Sentinel's) or a *redis.ClusterClient.
	Replicas int
	// ReplicaTimeout bounds the WAIT. Zero means a second.
	ReplicaTimeout time.Duration
	// MaxClockSkew is how far behind the highest TIME this Store has
	// read from any master a master's clock may read before the Store
	// refuses to take tokens from it (ErrClockBehind): farther means a
	// clock stepped back or a failover to a host whose clock lags, either
	// of which could hand out a token below an earlier one. Zero means
	// a second.
	MaxClockSkew time.Duration
}

// Errors, beside lock's.
var (
	// ErrEvictionPolicy is returned by New for a Redis that may evict
	// keys: an evicted lock frees itself, an evicted token restarts.
	ErrEvictionPolicy = errors.New("redisstore: Redis may evict lock keys")
	// ErrClockBehind is returned by Acquire when the master's clock
	// reads behind the name's last token, or more than MaxClockSkew
	// behind a time the Store read before: a token from it might not be
	// above every earlier one, so none is granted (it fails closed).
	ErrClockBehind = errors.New("redisstore: the Redis clock reads behind earlier tokens")
	// ErrNotReplicated is returned by Acquire when Options.Replicas did
	// not acknowledge a grant in time; the grant was undone.
	ErrNotReplicated = errors.New("redisstore: the grant did not reach enough replicas")
)

// Store is a lock.Backend in Redis. It starts no goroutines of its own
// (a waiting Acquire subscribes for as long as it waits), so it has no
// Close; the caller owns rdb and closes it.
type Store struct {
	rdb  redis.UniversalClient
	opts Options
	// seen is the highest TIME, in µs, any reply has carried: a master
	// reading more than MaxClockSkew behind it grants nothing.
	seen atomic.Int64
}

var _ lock.Backend = (*Store)(nil)

// New checks the options and that every server behind rdb keeps keys
// until they expire (maxmemory-policy noeviction, else an error
// wrapping ErrEvictionPolicy), and returns a Store over rdb. Options
// that cannot work return an error wrapping lock.ErrInvalidOptions.
func New(ctx context.Context, rdb redis.UniversalClient, o Options) (*Store, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: redisstore: a Redis client is required", lock.ErrInvalidOptions)
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Retain == 0 {
		o.Retain = time.Hour
	}
	if o.WaiterTTL == 0 {
		o.WaiterTTL = 2 * time.Second
	}
	if o.ReplicaTimeout == 0 {
		o.ReplicaTimeout = time.Second
	}
	if o.MaxClockSkew == 0 {
		o.MaxClockSkew = time.Second
	}
	switch {
	case strings.ContainsAny(o.Prefix, "{}"):
		return nil, fmt.Errorf("%w: redisstore: Prefix %q contains a brace, which would move the hash tag", lock.ErrInvalidOptions, o.Prefix)
	case o.Retain < time.Second || o.WaiterTTL < 30*time.Millisecond || o.ReplicaTimeout < 0 || o.MaxClockSkew < 0:
		return nil, fmt.Errorf("%w: redisstore: Retain %v (want ≥ 1s), WaiterTTL %v (want ≥ 30ms), ReplicaTimeout %v, MaxClockSkew %v",
			lock.ErrInvalidOptions, o.Retain, o.WaiterTTL, o.ReplicaTimeout, o.MaxClockSkew)
	case o.Replicas < 0:
		return nil, fmt.Errorf("%w: redisstore: Replicas %d", lock.ErrInvalidOptions, o.Replicas)
	}
	if o.Replicas > 0 {
		switch rdb.(type) {
		case *redis.Client, *redis.ClusterClient:
		default:
			return nil, fmt.Errorf("%w: redisstore: Replicas needs a *redis.Client or *redis.ClusterClient, not %T", lock.ErrInvalidOptions, rdb)
		}
	}
	if err := redispolicy.CheckNoEviction(ctx, rdb, redispolicy.Need{
		Err:  ErrEvictionPolicy,
		What: "lock keys",
		Harm: "an evicted lock frees itself while held and its token counter restarts",
	}); err != nil {
		return nil, err
	}
	return &Store{rdb: rdb, opts: o}, nil
}

// keys are one lock's Redis keys. The name is the hash tag, so that all
// of them, and the scripts over them, live in one slot of a cluster.
type keys struct{ hash, queue, waits string }

func (s *Store) keys(name string) keys {
	h := s.opts.Prefix + "{" + tag(name) + "}"
	return keys{h, h + ":q", h + ":w"}
}

func (k keys) list() []string { return []string{k.hash, k.queue, k.waits} }

// tag is name as a hash tag: itself, readable in redis-cli, unless a
// brace would end the tag early (or make it empty, which hashes the
// whole key); then '~' and its hex, which no plain tag starts with.
func tag(name string) string {
	if name == "" || strings.ContainsAny(name, "{}") || strings.HasPrefix(name, "~") {
		return "~" + hex.EncodeToString([]byte(name))
	}
	return name
}

func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// saw records a master's TIME (µs) as seen.
func (s *Store) saw(now int64) {
	for {
		old := s.seen.Load()
		if now <= old || s.seen.CompareAndSwap(old, now) {
			return
		}
	}
}

// reply is a script's array reply of strings.
type reply []string

func (s *Store) run(ctx context.Context, c redis.Scripter, sc *redis.Script, k keys, args ...any) (reply, error) {
	v, err := sc.Run(ctx, c, k.list(), args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	r := make(reply, len(v))
	for i, x := range v {
		r[i], _ = x.(string)
	}
	return r, nil
}

func (r reply) int(i int) int64 {
	if i >= len(r) {
		return 0
	}
	v, _ := strconv.ParseInt(r[i], 10, 64)
	return v
}

func (r reply) time(i int) time.Time { return time.UnixMicro(r.int(i)) }

// Acquire implements lock.Backend. A waiting Acquire subscribes to the
// lock's channel, which every release with waiters publishes on, and
// asks again on each message; it also asks when the holder's or the
// head waiter's expiry comes, and at a third of WaiterTTL to renew its
// own place in the queue.
func (s *Store) Acquire(ctx context.Context, name, owner string, ttl time.Duration, wait bool) (lock.Grant, error) {
	k := s.keys(name)
	var (
		sub    *redis.PubSub
		msgs   <-chan *redis.Message
		holder *lock.Grant // the last one seen, for the HeldError
		timer  *time.Timer
	)
	defer func() {
		if sub != nil {
			_ = sub.Close()
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	// giveUp ends a wait: off the queue, and a *HeldError.
	giveUp := func(cause error) (lock.Grant, error) {
		if holder == nil {
			return lock.Grant{}, cause
		}
		if wait {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.WaiterTTL)
			_, _ = s.run(lctx, s.rdb, leaveScript, k, owner) // else it lapses off the queue
			cancel()
		}
		return lock.Grant{}, &lock.HeldError{Holder: *holder}
	}
	for {
		r, err := s.acquireOnce(ctx, k, owner, ttl, wait)
		if err != nil {
			if ctx.Err() != nil {
				return giveUp(err)
			}
			return lock.Grant{}, err
		}
		var sleep time.Duration
		switch r[0] {
		case "ok":
			return lock.Grant{Name: name, Owner: owner, Token: r.int(1), Expires: r.time(3)}, nil
		case "held", "queued":
			holder = &lock.Grant{Name: name, Owner: r[1], Token: r.int(2), Expires: r.time(3)}
			if !wait {
				return lock.Grant{}, &lock.HeldError{Holder: *holder}
			}
			sleep = time.Duration(r.int(5))*time.Microsecond + time.Millisecond
		case "behind":
			// The clock reads behind the name's last token: a token now
			// could go backwards. A small gap is a clock that a burst of
			// grants outran (or a slewed one): wait it out.
			gap := time.Duration(r.int(2)) * time.Microsecond
			if gap > 50*time.Millisecond {
				return lock.Grant{}, fmt.Errorf("%w: %s reads %v behind the last token of %q", ErrClockBehind, "the master", gap, name)
			}
			sleep = gap + time.Microsecond
		case "skew":
			return lock.Grant{}, fmt.Errorf("%w: the master of %q reads %v behind a time this Store read before (MaxClockSkew %v)",
				ErrClockBehind, name, time.Duration(r.int(2))*time.Microsecond, s.opts.MaxClockSkew)
		default:
			return lock.Grant{}, fmt.Errorf("redisstore: unexpected reply %q", r)
		}
		if wait && sub == nil && r[0] != "behind" {
			// Subscribe, then ask again at once: a release between the
			// first ask and the subscription published to no one.
			if sub, err = s.subscribe(ctx, k.hash); err != nil {
				if ctx.Err() != nil {
					return giveUp(err)
				}
				return lock.Grant{}, err
			}
			msgs = sub.Channel()
			continue
		}
		sleep = min(sleep, s.opts.WaiterTTL/3)
		if timer == nil {
			timer = time.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-ctx.Done():
			return giveUp(ctx.Err())
		case <-msgs:
		case <-timer.C:
		}
	}
}

func (s *Store) subscribe(ctx context.Context, channel string) (*redis.PubSub, error) {
	sub := s.rdb.Subscribe(ctx, channel)
	if _, err := sub.Receive(ctx); err != nil { // the subscription is live
		_ = sub.Close()
		return nil, fmt.Errorf("redisstore: subscribe: %w", err)
	}
	return sub, nil
}

// acquireOnce runs the acquire script once; with Options.Replicas, on
// one connection to the lock's master, followed by WAIT.
func (s *Store) acquireOnce(ctx context.Context, k keys, owner string, ttl time.Duration, wait bool) (reply, error) {
	w := "0"
	if wait {
		w = "1"
	}
	args := []any{owner, us(ttl), w, us(s.opts.WaiterTTL), s.opts.Retain.Milliseconds(),
		strconv.FormatInt(s.seen.Load(), 10), us(s.opts.MaxClockSkew)}
	if s.opts.Replicas == 0 {
		r, err := s.run(ctx, s.rdb, acquireScript, k, args...)
		if err == nil && len(r) > 4 && r[0] != "skew" {
			s.saw(r.int(4))
		}
		return r, err
	}
	cl, err := s.master(ctx, k.hash)
	if err != nil {
		return nil, err
	}
	conn := cl.Conn() // WAIT counts the writes of its own connection
	defer func() { _ = conn.Close() }()
	r, err := s.run(ctx, conn, acquireScript, k, args...)
	if err != nil || r[0] != "ok" {
		return r, err
	}
	s.saw(r.int(4))
	got, err := conn.Wait(ctx, s.opts.Replicas, s.opts.ReplicaTimeout).Result()
	if err == nil && got >= int64(s.opts.Replicas) {
		return r, nil
	}
	if r[5] == "1" { // a new grant: undo it, so that it blocks no one
		_, _ = s.run(context.WithoutCancel(ctx), conn, releaseScript, k, owner, r[1])
	}
	if err != nil {
		return nil, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	return nil, fmt.Errorf("%w: %d of %d replicas acknowledged within %v", ErrNotReplicated, got, s.opts.Replicas, s.opts.ReplicaTimeout)
}

// master returns the client of the master that serves key.
func (s *Store) master(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		return m, nil
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("redisstore: no master for %T", s.rdb) // New refused it
}

// Renew implements lock.Backend: only a live grant of g's owner and
// token is extended; a lapsed one is lost even if no one took it.
func (s *Store) Renew(ctx context.Context, g lock.Grant, ttl time.Duration) (lock.Grant, error) {
	r, err := s.run(ctx, s.rdb, renewScript, s.keys(g.Name), g.Owner, strconv.FormatInt(g.Token, 10), us(ttl), s.opts.Retain.Milliseconds())
	if err != nil {
		return lock.Grant{}, err
	}
	if r[0] == "ok" {
		s.saw(r.int(2))
		g.Expires = r.time(1)
		return g, nil
	}
	if r[1] == "" {
		return lock.Grant{}, fmt.Errorf("%w: %q is free or lapsed", lock.ErrLost, g.Name)
	}
	return lock.Grant{}, fmt.Errorf("%w: %q is held by %q with token %s until %s", lock.ErrLost, g.Name, r[1], r[2],
		r.time(3).UTC().Format(time.RFC3339Nano))
}

// Release implements lock.Backend. A grant that lapsed but was not
// taken is freed too, and reported as ErrNotHeld: its holder's work
// outlasted its TTL.
func (s *Store) Release(ctx context.Context, g lock.Grant) error {
	r, err := s.run(ctx, s.rdb, releaseScript, s.keys(g.Name), g.Owner, strconv.FormatInt(g.Token, 10))
	switch {
	case err != nil:
		return err
	case r[0] == "ok":
		return nil
	case r[0] == "lapsed":
		return fmt.Errorf("%w: %q with token %d had lapsed before its release", lock.ErrNotHeld, g.Name, g.Token)
	case r[1] == "":
		return fmt.Errorf("%w: %q is free", lock.ErrNotHeld, g.Name)
	}
	return fmt.Errorf("%w: %q is %q's with token %s", lock.ErrNotHeld, g.Name, r[1], r[2])
}

// Describe implements lock.Backend, in one script: the holder and the
// waiters are read at one instant.
func (s *Store) Describe(ctx context.Context, name string) (lock.Info, error) {
	v, err := describeScript.Run(ctx, s.rdb, s.keys(name).list()).Slice()
	if err != nil {
		return lock.Info{}, fmt.Errorf("redisstore: %w", err)
	}
	if len(v) != 6 {
		return lock.Info{}, fmt.Errorf("redisstore: unexpected reply %q", v)
	}
	r := make(reply, 5)
	for i := range r {
		r[i], _ = v[i].(string)
	}
	info := lock.Info{Name: name}
	if r[1] != "" && r.int(4) > r.int(0) {
		info.Holder = &lock.Grant{Name: name, Owner: r[1], Token: r.int(2), Expires: r.time(4)}
		info.Since = r.time(3)
	}
	ws, _ := v[5].([]any)
	for i := 0; i+1 < len(ws); i += 2 {
		o, _ := ws[i].(string)
		at, _ := ws[i+1].(string)
		t, _ := strconv.ParseInt(at, 10, 64)
		info.Waiters = append(info.Waiters, lock.Waiter{Owner: o, Since: time.UnixMicro(t)})
	}
	return info, nil
}
