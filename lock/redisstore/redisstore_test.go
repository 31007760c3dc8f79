package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/lock/locktest"
	"github.com/idgen/idgen/lock/redisstore"
	"github.com/idgen/idgen/store/dbtest"
)

// suiteTTL is the TTL the suite lets lapse: Redis expires by its own
// clock to the microsecond, so short is precise; not shorter, for a
// loaded 2-core CI machine.
const suiteTTL = 300 * time.Millisecond

// suite is locktest's Config over Stores opened by open, each on a
// client of its own; Kill closes that client and nothing else, as a
// crash would.
func suite(t *testing.T, open func() redis.UniversalClient, o redisstore.Options) locktest.Config {
	var clients sync.Map // *redisstore.Store → redis.UniversalClient
	return locktest.Config{
		TTL: suiteTTL,
		Open: func(t *testing.T) lock.Backend {
			rdb := open()
			t.Cleanup(func() { _ = rdb.Close() })
			st, err := redisstore.New(context.Background(), rdb, o)
			if err != nil {
				t.Fatal(err)
			}
			clients.Store(st, rdb)
			return st
		},
		Kill: func(t *testing.T, b lock.Backend) {
			rdb, _ := clients.Load(b)
			_ = rdb.(redis.UniversalClient).Close()
		},
	}
}

// The conformance suite on one redis-server. A dead waiter's place
// lapses WaiterTTL after its last renewal, so the live one behind three
// is granted within it.
func TestStore_Conformance(t *testing.T) {
	t.Parallel()
	addr := dbtest.StartRedis(t)
	locktest.Run(t, suite(t, func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: addr})
	}, redisstore.Options{WaiterTTL: 300 * time.Millisecond}))
}

func newStore(t *testing.T, rdb redis.UniversalClient, o redisstore.Options) *redisstore.Store {
	t.Helper()
	st, err := redisstore.New(context.Background(), rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitFor fails t unless cond holds within a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !testtime.Until(time.Minute, time.Millisecond, cond) {
		t.Fatalf("timed out waiting until %s", what)
	}
}

func client(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// On a Redis Cluster of 3 masters: the suite, with every script in one
// slot per lock (a script naming keys of two slots fails with
// CROSSSLOT), locks spread over every master, names with braces kept
// apart, and a shard with an evicting policy refused.
func TestStore_Cluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addrs := dbtest.StartRedisCluster(t, 3)
	open := func() redis.UniversalClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}) }

	t.Run("Conformance", func(t *testing.T) {
		locktest.Run(t, suite(t, open, redisstore.Options{WaiterTTL: 300 * time.Millisecond}))
	})

	t.Run("Spread", func(t *testing.T) {
		rdb := open().(*redis.ClusterClient)
		t.Cleanup(func() { _ = rdb.Close() })
		st := newStore(t, rdb, redisstore.Options{Prefix: "spread:"})
		names := []string{"a{b", "a}b", "{}", "~x", "}{", "{x}"}
		for i := range 30 {
			names = append(names, fmt.Sprint("user-", i))
		}
		tokens := map[string]int64{}
		for _, n := range names {
			g, err := st.Acquire(ctx, n, "o", time.Minute, false)
			if err != nil {
				t.Fatalf("%q: %v", n, err)
			}
			tokens[n] = g.Token
		}
		for _, n := range names { // each name is its own lock
			info, err := st.Describe(ctx, n)
			if err != nil || info.Holder == nil || info.Holder.Token != tokens[n] {
				t.Fatalf("%q: %+v, %v; want the grant with token %d", n, info.Holder, err, tokens[n])
			}
		}
		var masters atomic.Int32
		err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			k, err := c.Keys(ctx, "spread:*").Result()
			if len(k) > 0 {
				masters.Add(1)
			}
			return err
		})
		if err != nil || masters.Load() != 3 {
			t.Fatalf("locks on %d masters (%v); want all 3", masters.Load(), err)
		}
	})

	// The guard's fence and the caller's keys share the resource's slot.
	t.Run("Guard", func(t *testing.T) {
		rdb := open()
		t.Cleanup(func() { _ = rdb.Close() })
		st := newStore(t, rdb, redisstore.Options{})
		for i := range 6 {
			res := fmt.Sprint("acct:", i)
			w := []any{"SET", "{" + res + "}:balance", "10"}
			if err := st.Guarded(ctx, res, 5, w, []any{"INCR", "{" + res + "}:writes"}); err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			if err := st.Guarded(ctx, res, 4, w); !errors.Is(err, lock.ErrStaleToken) {
				t.Fatalf("%s, token 4 after 5: %v; want ErrStaleToken", res, err)
			}
		}
	})

	// WAIT goes to the lock's master over one connection: with no
	// replicas in this cluster, every grant is undone and reported.
	t.Run("ReplicasMissing", func(t *testing.T) {
		rdb := open()
		t.Cleanup(func() { _ = rdb.Close() })
		st := newStore(t, rdb, redisstore.Options{Prefix: "rep:", Replicas: 1, ReplicaTimeout: 50 * time.Millisecond})
		if _, err := st.Acquire(ctx, "n", "a", time.Minute, false); !errors.Is(err, redisstore.ErrNotReplicated) {
			t.Fatalf("%v; want ErrNotReplicated", err)
		}
		if info, err := st.Describe(ctx, "n"); err != nil || info.Holder != nil {
			t.Fatalf("%+v, %v; want the grant undone", info.Holder, err)
		}
	})

	t.Run("EvictionPolicy", func(t *testing.T) {
		one := client(t, addrs[1])
		if err := one.ConfigSet(ctx, "maxmemory-policy", "volatile-ttl").Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = one.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err() })
		rdb := open()
		t.Cleanup(func() { _ = rdb.Close() })
		_, err := redisstore.New(ctx, rdb, redisstore.Options{})
		if !errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), addrs[1]) {
			t.Fatalf("a shard on volatile-ttl: %v; want ErrEvictionPolicy naming %s", err, addrs[1])
		}
	})
}

// New refuses every policy that can drop a lock key before its TTL.
func TestNew_EvictionPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := client(t, dbtest.StartRedis(t))
	for _, tc := range []struct {
		policy string
		ok     bool
	}{
		{"noeviction", true},
		{"allkeys-lru", false},
		{"volatile-lru", false},
		{"volatile-ttl", false},
		{"allkeys-random", false},
	} {
		if err := rdb.ConfigSet(ctx, "maxmemory-policy", tc.policy).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := redisstore.New(ctx, rdb, redisstore.Options{})
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v; want the store", tc.policy, err)
		case !tc.ok && (!errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), tc.policy) ||
			!strings.Contains(err.Error(), "maxmemory-policy noeviction")):
			t.Errorf("%s: %v; want ErrEvictionPolicy naming %s and noeviction", tc.policy, err, tc.policy)
		}
	}
}

// New refuses options that cannot work, before any I/O.
func TestNew_InvalidOptions(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	for _, o := range []redisstore.Options{
		{Prefix: "a{b"},
		{Retain: time.Millisecond},
		{WaiterTTL: time.Millisecond},
		{Replicas: -1},
		{MaxClockSkew: -time.Second},
	} {
		if _, err := redisstore.New(context.Background(), rdb, o); !errors.Is(err, lock.ErrInvalidOptions) {
			t.Errorf("%+v: %v; want ErrInvalidOptions", o, err)
		}
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { _ = ring.Close() })
	if _, err := redisstore.New(context.Background(), ring, redisstore.Options{Replicas: 1}); !errors.Is(err, lock.ErrInvalidOptions) {
		t.Errorf("Replicas on a ring: %v; want ErrInvalidOptions", err)
	}
}

// Nothing leaks (Redisson #6510): once a lock is released and Retain
// passes, its keys are gone. The next grant, with no counter left,
// takes its token from the clock, above the one before.
func TestStore_TokenAfterTheHashExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := client(t, dbtest.StartRedis(t))
	st := newStore(t, rdb, redisstore.Options{Retain: time.Second, WaiterTTL: 100 * time.Millisecond})
	const n = "order-7"
	g, err := st.Acquire(ctx, n, "a", 100*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	// A waiter that gives up, so that the queue's keys exist too.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, _ = st.Acquire(wctx, n, "b", time.Second, true)
	cancel()
	if err := st.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	// Every key left expires, within the grant's TTL and Retain (and a
	// quarter more, see Options.Retain): none is kept for good.
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys after the release: %v, %v; want the lock's", keys, err)
	}
	for _, k := range keys {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 || ttl > 1350*time.Millisecond {
			t.Fatalf("key %q expires in %v after the release; want within the TTL and 1.25 Retain (1.35s)", k, ttl)
		}
	}
	start := time.Now()
	err = testtime.WaitFor(time.Minute, 10*time.Millisecond, func() error {
		keys, err := rdb.Keys(ctx, "*").Result()
		if err == nil && len(keys) > 0 {
			err = fmt.Errorf("keys left after Retain: %v", keys)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("every key gone %v after the release", time.Since(start).Round(time.Millisecond))
	g2, err := st.Acquire(ctx, n, "b", time.Second, false)
	if err != nil || g2.Token <= g.Token {
		t.Fatalf("after the hash expired: %+v, %v; want a token above %d", g2, err, g.Token)
	}
}

// The token fails closed: a master whose clock reads behind the name's
// last token (a clock stepped back) grants nothing, rather than a token
// that could go below one granted before.
func TestStore_ClockBehindFailsClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := client(t, dbtest.StartRedis(t))
	st := newStore(t, rdb, redisstore.Options{Prefix: "t:"})
	g, err := st.Acquire(ctx, "n", "a", time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	// What a clock stepped back 10s leaves: a last token 10s ahead.
	ahead := fmt.Sprint(g.Token + 10_000_000)
	if err := rdb.HSet(ctx, "t:{n}", "t", ahead).Err(); err != nil {
		t.Fatal(err)
	}
	if g2, err := st.Acquire(ctx, "n", "b", time.Second, false); !errors.Is(err, redisstore.ErrClockBehind) {
		t.Fatalf("a clock 10s behind the last token: %+v, %v; want ErrClockBehind", g2, err)
	}
	if got := rdb.HGet(ctx, "t:{n}", "t").Val(); got != ahead {
		t.Fatalf("the last token is %s after a refused grant; want %s untouched", got, ahead)
	}
	// Within 50ms the grant waits for the clock instead.
	if err := rdb.HSet(ctx, "t:{n}", "t", fmt.Sprint(time.Now().UnixMicro()+20_000)).Err(); err != nil {
		t.Fatal(err)
	}
	if g3, err := st.Acquire(ctx, "n", "b", time.Second, false); err != nil {
		t.Fatalf("a clock 20ms behind: %v; want a grant once it caught up", err)
	} else {
		t.Logf("token %d after waiting for the clock", g3.Token)
	}
}

// A Redis restarted without persistence comes back empty: the holder's
// grant is gone (its renewal says ErrLost, and another owner is granted
// at once: two holders, which only the guard tells apart), and the next
// token comes from the clock, above every earlier one by about the time
// the restart took. The measured figures are logged; docs/locks.md and
// the package doc quote them.
func TestStore_RestartWithoutPersistence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := dbtest.StartRedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	st := newStore(t, rdb, redisstore.Options{})
	var last int64
	var held lock.Grant
	for i := range 5 { // a busy lock: tokens a few µs apart
		g, err := st.Acquire(ctx, "n", fmt.Sprint("o", i), time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		last, held = g.Token, g
		if i < 4 {
			if err := st.Release(ctx, g); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Guarded(ctx, "res", held.Token, []any{"SET", "{res}:v", "old"}); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	srv.Restart(t)
	var g lock.Grant
	err := testtime.WaitFor(time.Minute, time.Millisecond, func() (err error) { // until the pool dials the new server
		g, err = st.Acquire(ctx, "n", "after", time.Minute, false)
		return err
	})
	if err != nil {
		t.Fatalf("acquire after the restart: %v", err)
	}
	if g.Token <= last {
		t.Fatalf("token %d after the restart; want above %d", g.Token, last)
	}
	if _, err := st.Renew(ctx, held, time.Minute); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("the old holder's renewal: %v; want ErrLost", err)
	}
	// The guard's fence went with the data it guards: both start over.
	v, err := rdb.Get(ctx, "{res}:v").Result()
	if !errors.Is(err, redis.Nil) {
		t.Fatalf("the guarded value after the restart: %q, %v; want it gone", v, err)
	}
	t.Logf("restart without persistence: the lock was granted again at once; token %d → %d, +%v (the restart took %v)",
		last, g.Token, time.Duration(g.Token-last)*time.Microsecond, time.Since(killed).Round(time.Millisecond))
}

// With Replicas, a grant returns only once a replica has it; a grant no
// replica acknowledges is undone and reported.
func TestStore_Replicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master := dbtest.StartRedisServer(t, "--repl-diskless-sync-delay", "0")
	host, port, _ := strings.Cut(master.Addr, ":")
	replica := dbtest.StartRedisServer(t, "--replicaof", host, port)
	rc := client(t, replica.Addr)
	mc := client(t, master.Addr)
	// The master counts the replica for WAIT once the replica's first
	// ACK turned it online, after the replica reports its link up.
	waitFor(t, "the replica is online", func() bool {
		return strings.Contains(mc.Info(ctx, "replication").Val(), "state=online")
	})
	rdb := client(t, master.Addr)
	// A grant that must reach the replica waits for its ACK as long as
	// it takes (a replica on a loaded machine may take longer than any
	// short timeout); one that must not waits 200ms for none to come.
	patient := newStore(t, rdb, redisstore.Options{Prefix: "r:", Replicas: 1, ReplicaTimeout: time.Minute})
	st := newStore(t, rdb, redisstore.Options{Prefix: "r:", Replicas: 1, ReplicaTimeout: 200 * time.Millisecond})
	g, err := patient.Acquire(ctx, "n", "a", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := rc.HGet(ctx, "r:{n}", "t").Val(); got != fmt.Sprint(g.Token) {
		t.Fatalf("the replica has token %q once the grant returned; want %d", got, g.Token)
	}
	if err := rc.SlaveOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the master counts no replica", func() bool {
		return strings.Contains(rdb.Info(ctx, "replication").Val(), "connected_slaves:0")
	})
	if g2, err := st.Acquire(ctx, "m", "a", time.Minute, false); !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("a grant no replica saw: %+v, %v; want ErrNotReplicated", g2, err)
	}
	if info, err := st.Describe(ctx, "m"); err != nil || info.Holder != nil {
		t.Fatalf("after the unreplicated grant: %+v, %v; want it undone", info.Holder, err)
	}
}

// The guard, as Kleppmann's scenario has it: a holder paused past its
// TTL wakes after another holder wrote, and its write is refused with
// ErrStaleToken; the current holder writes again with its own token.
func TestStore_GuardRefusesAStaleToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := client(t, dbtest.StartRedis(t))
	st := newStore(t, rdb, redisstore.Options{})
	l, err := lock.New(st, lock.Options{MinTTL: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	set := func(v string) []any { return []any{"HSET", "{acct:7}", "balance", v} }
	paused, err := st.Acquire(ctx, "acct:7", "paused", 100*time.Millisecond, false) // no watchdog: it pauses
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Guarded(ctx, "acct:7", paused.Token, set("100")); err != nil {
		t.Fatal(err)
	}
	le, err := l.Acquire(ctx, "acct:7", "next", time.Second) // waits out the pause
	if err != nil {
		t.Fatal(err)
	}
	defer le.Release(ctx)
	if le.Token() <= paused.Token {
		t.Fatalf("token %d after %d", le.Token(), paused.Token)
	}
	for _, v := range []string{"90", "80"} { // one holder, several writes
		if err := st.Guarded(ctx, "acct:7", le.Token(), set(v)); err != nil {
			t.Fatal(err)
		}
	}
	err = st.Guarded(ctx, "acct:7", paused.Token, set("100"), []any{"SET", "{acct:7}:audit", "paused"})
	if !errors.Is(err, lock.ErrStaleToken) {
		t.Fatalf("the paused holder's write: %v; want ErrStaleToken", err)
	}
	if v := rdb.HGet(ctx, "{acct:7}", "balance").Val(); v != "80" {
		t.Fatalf("balance %q; want 80, the current holder's", v)
	}
	if n := rdb.Exists(ctx, "{acct:7}:audit").Val(); n != 0 {
		t.Fatal("a refused write wrote part of itself")
	}
	if err := st.Guarded(ctx, "a{b", 1); !errors.Is(err, lock.ErrInvalidName) {
		t.Fatalf("a resource with a brace: %v; want ErrInvalidName", err)
	}
}

// The hash's q field marks a lock whose queue may exist: set by a
// waiter, kept while the queue is, cleared by the release that finds
// the queue gone. Without it an acquire and a release never look at the
// queue, so a waiter must always leave it set.
func TestStore_QueueFlag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := client(t, dbtest.StartRedis(t))
	st := newStore(t, rdb, redisstore.Options{Prefix: "f:"})
	const n, hash = "n", "f:{n}"
	flag := func(want bool) {
		t.Helper()
		if got := rdb.HExists(ctx, hash, "q").Val(); got != want {
			t.Fatalf("q set: %v; want %v", got, want)
		}
	}
	g, err := st.Acquire(ctx, n, "a", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	flag(false)
	got := make(chan error, 1)
	go func() {
		g, err := st.Acquire(ctx, n, "b", time.Minute, true)
		if err == nil {
			err = st.Release(ctx, g)
		}
		got <- err
	}()
	if err := testtime.WaitFor(5*time.Second, time.Millisecond, func() error {
		info, err := st.Describe(ctx, n)
		if err == nil && len(info.Waiters) != 1 {
			err = fmt.Errorf("%d waiters; want b queued", len(info.Waiters))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	flag(true)
	if err := st.Release(ctx, g); err != nil { // wakes b, which takes and releases
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	flag(false)
	if k := rdb.Exists(ctx, hash+":q", hash+":w").Val(); k != 0 {
		t.Fatalf("%d queue keys left", k)
	}
}

// A TryAcquire names only the lock's hash to its script, and asks again
// with the queue's keys when the hash says a queue may exist: it must
// still yield to a live waiter and skip a dead one.
func TestStore_TryAcquireWithAQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := client(t, dbtest.StartRedis(t))
	st := newStore(t, rdb, redisstore.Options{Prefix: "y:"})
	const n, hash = "n", "y:{n}"
	// A queue as a waiter leaves it: its arrival, its own expiry, the
	// hash's mark. Its expiry is far off: it is alive.
	now := time.Now().UnixMicro()
	queue := func(owner string, expiry int64) {
		t.Helper()
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.ZAdd(ctx, hash+":q", redis.Z{Score: float64(now), Member: owner})
			p.ZAdd(ctx, hash+":w", redis.Z{Score: float64(expiry), Member: owner})
			p.HSet(ctx, hash, "q", "1")
			for _, k := range []string{hash, hash + ":q", hash + ":w"} {
				p.Expire(ctx, k, time.Minute)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	queue("w", now+60_000_000)
	var held *lock.HeldError
	if g, err := st.Acquire(ctx, n, "c", time.Minute, false); !errors.As(err, &held) || held.Holder.Owner != "w" {
		t.Fatalf("TryAcquire with a live waiter queued: %+v, %v; want a HeldError naming w", g, err)
	}
	// The waiter dies: its expiry passes. The next TryAcquire skips it.
	if err := rdb.ZAdd(ctx, hash+":w", redis.Z{Score: float64(now - 1), Member: "w"}).Err(); err != nil {
		t.Fatal(err)
	}
	g, err := st.Acquire(ctx, n, "c", time.Minute, false)
	if err != nil {
		t.Fatalf("TryAcquire behind a dead waiter: %v; want a grant", err)
	}
	if info, err := st.Describe(ctx, n); err != nil || info.Holder == nil || info.Holder.Owner != "c" || len(info.Waiters) != 0 {
		t.Fatalf("after the grant: %+v, %v; want c holding, no waiter", info, err)
	}
	if err := st.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
}
