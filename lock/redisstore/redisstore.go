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
	// token, outlives the lock's last grant or renewal (its expiry):
	// that long, and at most a quarter more, so that back-to-back grants
	// need not set the key's TTL each time. Past it the key is gone and
	// the next token comes from the clock alone (see the package doc).
	// Zero means an hour.
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
	// The acquire script's arguments that come from opts, boxed once:
	// the waiter TTL in µs, and Retain in ms.
	waiterTTL, retain any
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
	return &Store{rdb: rdb, opts: o,
		waiterTTL: o.WaiterTTL.Microseconds(),
		retain:    o.Retain.Milliseconds(),
	}, nil
}

// keys are one lock's Redis keys. The name is the hash tag, so that all
// of them, and the scripts over them, live in one slot of a cluster.
type keys struct{ hash, queue, waits string }

// keys builds the three keys in one string, h + ":q" + h + ":w", and
// slices them out of it.
func (s *Store) keys(name string) keys {
	t := tag(name)
	n := len(s.opts.Prefix) + len(t) + 2
	all := s.opts.Prefix + "{" + t + "}:q" + s.opts.Prefix + "{" + t + "}:w" // one allocation
	return keys{all[:n], all[:n+2], all[n+2:]}
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

// saw records a master's TIME (µs) as seen.
func (s *Store) saw(now int64) {
	for {
		old := s.seen.Load()
		if now <= old || s.seen.CompareAndSwap(old, now) {
			return
		}
	}
}

// run runs a script (EVALSHA, and EVAL if the server lacks it) and
// returns its reply as go-redis read it: an int64, a string or an []any.
func run(ctx context.Context, c redis.Scripter, sc *redis.Script, keys []string, args ...any) (any, error) {
	v, err := sc.Run(ctx, c, keys, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	return v, nil
}

// intAt and strAt read element i of an array reply, whether Redis sent
// it as an integer or a string; a missing or malformed one reads as
// zero or empty.
func intAt(v []any, i int) int64 {
	if i >= len(v) {
		return 0
	}
	switch x := v[i].(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func strAt(v []any, i int) string {
	if i >= len(v) {
		return ""
	}
	switch x := v[i].(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// acquired is acquireScript's reply. kind is 0 for a new grant, else one
// of the acq constants; who is the holder (acqHeld) or the head waiter
// (acqQueued); gap is how far the clock reads behind (acqBehind,
// acqSkew). Times are µs by the master's clock.
type acquired struct {
	kind            int64
	who             string
	token, exp, now int64
	gap             int64
}

func parseAcquired(v any, ttl time.Duration) (acquired, error) {
	switch x := v.(type) {
	case int64: // a new grant, the common reply
		return acquired{token: x, exp: x + ttl.Microseconds(), now: x}, nil
	case []any:
		a := acquired{kind: intAt(x, 0)}
		switch a.kind {
		case acqOK:
			a.token, a.exp, a.now = intAt(x, 1), intAt(x, 2), intAt(x, 3)
		case acqHeld:
			a.who, a.token, a.exp, a.now = strAt(x, 1), intAt(x, 2), intAt(x, 3), intAt(x, 4)
		case acqQueued:
			a.who, a.exp, a.now = strAt(x, 1), intAt(x, 2), intAt(x, 3)
		case acqBehind:
			a.now, a.gap = intAt(x, 1), intAt(x, 2)
		case acqSkew: // acquireOn fills in the gap
			a.now = intAt(x, 1)
		case acqKeys:
		default:
			return acquired{}, fmt.Errorf("redisstore: unexpected reply %v", x)
		}
		return a, nil
	}
	return acquired{}, fmt.Errorf("redisstore: unexpected reply %v", v)
}

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
			_, _ = run(lctx, s.rdb, leaveScript, k.list(), owner) // else it lapses off the queue
			cancel()
		}
		return lock.Grant{}, &lock.HeldError{Holder: *holder}
	}
	args := s.acquireArgs(owner, ttl, wait)
	// A TryAcquire names only the hash, which is all an uncontended one
	// touches: fewer strings for the script and the client to make.
	ks := k.list()
	if !wait {
		ks = ks[:1]
	}
	for {
		r, err := s.acquireOnce(ctx, ks, args, ttl)
		if err != nil {
			if ctx.Err() != nil {
				return giveUp(err)
			}
			return lock.Grant{}, err
		}
		var sleep time.Duration
		switch r.kind {
		case 0, acqOK:
			return lock.Grant{Name: name, Owner: owner, Token: r.token, Expires: time.UnixMicro(r.exp)}, nil
		case acqHeld, acqQueued:
			holder = &lock.Grant{Name: name, Owner: r.who, Token: r.token, Expires: time.UnixMicro(r.exp)}
			if !wait {
				return lock.Grant{}, &lock.HeldError{Holder: *holder}
			}
			sleep = time.Duration(r.exp-r.now)*time.Microsecond + time.Millisecond
		case acqBehind:
			// The clock reads behind the name's last token: a token now
			// could go backwards. A small gap is a clock that a burst of
			// grants outran (or a slewed one): wait it out.
			gap := time.Duration(r.gap) * time.Microsecond
			if gap > 50*time.Millisecond {
				return lock.Grant{}, fmt.Errorf("%w: %s reads %v behind the last token of %q", ErrClockBehind, "the master", gap, name)
			}
			sleep = gap + time.Microsecond
		case acqSkew:
			return lock.Grant{}, fmt.Errorf("%w: the master of %q reads %v behind a time this Store read before (MaxClockSkew %v)",
				ErrClockBehind, name, time.Duration(r.gap)*time.Microsecond, s.opts.MaxClockSkew)
		case acqKeys:
			if len(ks) == 3 { // a script that wants what it had
				return lock.Grant{}, fmt.Errorf("redisstore: unexpected reply %v", acqKeys)
			}
			ks = k.list()
			continue
		}
		if wait && sub == nil && r.kind != acqBehind {
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

// acquireArgs are acquireScript's ARGV but the least time the clock
// may read, which acquireOnce fills in each time.
func (s *Store) acquireArgs(owner string, ttl time.Duration, wait bool) []any {
	w := zero
	if wait {
		w = s.waiterTTL
	}
	return []any{owner, ttl.Microseconds(), w, s.retain, nil}
}

// zero is 0, boxed once.
var zero any = int64(0)

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
func (s *Store) acquireOnce(ctx context.Context, ks []string, args []any, ttl time.Duration) (acquired, error) {
	seen := s.seen.Load()
	args[4] = seen - s.opts.MaxClockSkew.Microseconds()
	if s.opts.Replicas == 0 {
		return s.acquireOn(ctx, s.rdb, ks, args, ttl, seen)
	}
	cl, err := s.master(ctx, ks[0])
	if err != nil {
		return acquired{}, err
	}
	conn := cl.Conn() // WAIT counts the writes of its own connection
	defer func() { _ = conn.Close() }()
	r, err := s.acquireOn(ctx, conn, ks, args, ttl, seen)
	if err != nil || (r.kind != 0 && r.kind != acqOK) {
		return r, err
	}
	got, err := conn.Wait(ctx, s.opts.Replicas, s.opts.ReplicaTimeout).Result()
	if err == nil && got >= int64(s.opts.Replicas) {
		return r, nil
	}
	if r.kind == 0 { // a new grant: undo it, so that it blocks no one
		_, _ = run(context.WithoutCancel(ctx), conn, releaseScript, []string{ks[0], ks[0] + ":q"}, args[0], r.token)
	}
	if err != nil {
		return acquired{}, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	return acquired{}, fmt.Errorf("%w: %d of %d replicas acknowledged within %v", ErrNotReplicated, got, s.opts.Replicas, s.opts.ReplicaTimeout)
}

// acquireOn runs the acquire script on c and records the time it read;
// seen is the highest time seen that the script was given.
func (s *Store) acquireOn(ctx context.Context, c redis.Scripter, ks []string, args []any, ttl time.Duration, seen int64) (acquired, error) {
	v, err := run(ctx, c, acquireScript, ks, args...)
	if err != nil {
		return acquired{}, err
	}
	r, err := parseAcquired(v, ttl)
	switch {
	case err != nil || r.kind == acqBehind || r.kind == acqKeys:
	case r.kind == acqSkew:
		r.gap = seen - r.now
	default:
		s.saw(r.now)
	}
	return r, err
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
	k := s.keys(g.Name)
	v, err := run(ctx, s.rdb, renewScript, []string{k.hash}, g.Owner, g.Token, ttl.Microseconds(), s.opts.Retain.Milliseconds())
	if err != nil {
		return lock.Grant{}, err
	}
	r, _ := v.([]any)
	switch {
	case len(r) == 2:
		s.saw(intAt(r, 1))
		g.Expires = time.UnixMicro(intAt(r, 0))
		return g, nil
	case len(r) != 3:
		return lock.Grant{}, fmt.Errorf("redisstore: unexpected reply %v", v)
	case strAt(r, 0) == "":
		return lock.Grant{}, fmt.Errorf("%w: %q is free or lapsed", lock.ErrLost, g.Name)
	}
	return lock.Grant{}, fmt.Errorf("%w: %q is held by %q with token %s until %s", lock.ErrLost, g.Name, strAt(r, 0), strAt(r, 1),
		time.UnixMicro(intAt(r, 2)).UTC().Format(time.RFC3339Nano))
}

// Release implements lock.Backend. A grant that lapsed but was not
// taken is freed too, and reported as ErrNotHeld: its holder's work
// outlasted its TTL.
func (s *Store) Release(ctx context.Context, g lock.Grant) error {
	k := s.keys(g.Name)
	v, err := run(ctx, s.rdb, releaseScript, []string{k.hash, k.queue}, g.Owner, g.Token)
	if err != nil {
		return err
	}
	switch r := v.(type) {
	case int64:
		switch r {
		case 1:
			return nil
		case 2:
			return fmt.Errorf("%w: %q with token %d had lapsed before its release", lock.ErrNotHeld, g.Name, g.Token)
		}
	case []any:
		if len(r) == 2 {
			if strAt(r, 0) == "" {
				return fmt.Errorf("%w: %q is free", lock.ErrNotHeld, g.Name)
			}
			return fmt.Errorf("%w: %q is %q's with token %s", lock.ErrNotHeld, g.Name, strAt(r, 0), strAt(r, 1))
		}
	}
	return fmt.Errorf("redisstore: unexpected reply %v", v)
}

// Describe implements lock.Backend, in one script: the holder and the
// waiters are read at one instant.
func (s *Store) Describe(ctx context.Context, name string) (lock.Info, error) {
	v, err := run(ctx, s.rdb, describeScript, s.keys(name).list())
	if err != nil {
		return lock.Info{}, err
	}
	r, _ := v.([]any)
	if len(r) != 5 {
		return lock.Info{}, fmt.Errorf("redisstore: unexpected reply %v", v)
	}
	info := lock.Info{Name: name}
	if owner, exp := strAt(r, 1), intAt(r, 3); owner != "" && exp > intAt(r, 0) {
		tok := intAt(r, 2)
		info.Holder = &lock.Grant{Name: name, Owner: owner, Token: tok, Expires: time.UnixMicro(exp)}
		info.Since = time.UnixMicro(tok) // a token is the µs of its grant
	}
	ws, _ := r[4].([]any)
	for i := 0; i+1 < len(ws); i += 2 {
		info.Waiters = append(info.Waiters, lock.Waiter{Owner: strAt(ws, i), Since: time.UnixMicro(intAt(ws, i+1))})
	}
	return info, nil
}
