package lockbench

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/lock/etcdstore"
	"github.com/idgen/idgen/lock/redisstore"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/mysql"
	"github.com/idgen/idgen/store/postgres"
	"github.com/idgen/idgen/store/sqlite"
)

// ttl is every grant's TTL: long enough that no grant lapses during a
// benchmark, and a Lease's watchdog never renews within one iteration.
const ttl = 10 * time.Second

// settle is how long a queued waiter waits before the holder releases in
// BenchmarkHandOff: a waiter that has been waiting a while, as most do
// (and past the point where a poll has backed off to its longest
// period), but within etcd's 100 ms unsynced-watcher catch-up, which a
// waiter must not depend on.
const settle = 20 * time.Millisecond

// op is one uncontended acquire and release.
type op func(ctx context.Context) error

// impl is one row of a server: a floor, idgen's backend, or a peer.
type impl struct {
	name string
	op   op
}

// BenchmarkAcquireRelease is one uncontended acquire and release of one
// lock name, on each server, in rows side by side:
//   - impl=floor: the least a lock costs there. SQL: an INSERT … ON
//     CONFLICT (MySQL: ON DUPLICATE KEY UPDATE) that takes a free or
//     lapsed row and a DELETE by name and owner, each its own
//     autocommitted statement, on a table of the lock table's shape.
//     Redis: SET NX PX and a Lua compare-and-delete (EVALSHA). etcd: a
//     bare concurrency.Mutex's Lock and Unlock on one session.
//   - impl=backend: lock.Backend's Acquire (wait false) and Release.
//   - impl=locker: lock.Locker's TryAcquire and the Lease's Release,
//     which adds the Lease and its watchdog's start and stop.
//   - impl=redislock, impl=redsync (Redis): bsm/redislock's Obtain and
//     Release, go-redsync's TryLock and Unlock (one try, one pool).
func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("db=postgres", func(b *testing.B) {
		st, _, dsn := openPostgres(b)
		runImpls(b, append([]impl{{"floor", postgresFloor(b, dsn)}}, idgenImpls(b, st.Locks())...), nil)
	})
	b.Run("db=mysql", func(b *testing.B) {
		st, _ := openMySQL(b)
		runImpls(b, append([]impl{{"floor", mysqlFloor(b, st.DB())}}, idgenImpls(b, st.Locks())...), nil)
	})
	b.Run("db=sqlite", func(b *testing.B) {
		st, _ := openSQLite(b)
		runImpls(b, append([]impl{{"floor", sqliteFloor(b, st.DB())}}, idgenImpls(b, st.Locks())...), nil)
	})
	b.Run("db=redis", func(b *testing.B) {
		rdb, _ := startRedis(b)
		be := newRedisStore(b, rdb)
		impls := append([]impl{{"floor", redisFloor(rdb)}}, idgenImpls(b, be)...)
		impls = append(impls, impl{"redislock", redislockOp(rdb)}, impl{"redsync", redsyncOp(rdb)})
		runImpls(b, impls, redisCPU(rdb))
	})
	b.Run("db=etcd", func(b *testing.B) {
		cli, _ := startEtcd(b)
		runImpls(b, append([]impl{{"floor", etcdFloor(b, cli)}}, idgenImpls(b, newEtcdStore(b, cli))...), nil)
	})
}

// BenchmarkHandOff is the time from a holder's Release call to a queued
// waiter's grant (its Acquire returning), each a client of its own (two
// Stores on one server, as two processes would be), after the waiter
// has waited settle. It reports the rounds' p50 and p90 in ms; ns/op is
// a whole round's time (acquire, queue, settle, release, hand-off,
// release), not a latency.
//
// PostgreSQL wakes the waiter with LISTEN/NOTIFY, Redis with pub/sub,
// etcd with a watch on the key ahead; MySQL and SQLite poll (see
// store.Store.Locks).
func BenchmarkHandOff(b *testing.B) {
	b.Run("db=postgres", func(b *testing.B) {
		st, open, _ := openPostgres(b)
		handOff(b, st.Locks(), open().Locks())
	})
	b.Run("db=mysql", func(b *testing.B) {
		st, open := openMySQL(b)
		handOff(b, st.Locks(), open().Locks())
	})
	b.Run("db=sqlite", func(b *testing.B) {
		st, open := openSQLite(b)
		handOff(b, st.Locks(), open().Locks())
	})
	b.Run("db=redis", func(b *testing.B) {
		rdb, open := startRedis(b)
		handOff(b, newRedisStore(b, rdb), newRedisStore(b, open()))
	})
	b.Run("db=etcd", func(b *testing.B) {
		cli, open := startEtcd(b)
		handOff(b, newEtcdStore(b, cli), newEtcdStore(b, open()))
	})
}

// runImpls runs each impl as a sub-benchmark. Besides the wall time
// it reports cpu-µs/op, this process's CPU time (user and system) per
// iteration, steadier than the wall time on a shared machine; and, when
// server is not nil, srv-cpu-µs/op, the server's, from server's
// cumulative CPU seconds. With LOCKBENCH_REVERSE set it runs them in
// the reverse order, so that a run of several processes can alternate
// the order and no row always runs first on a fresh server.
func runImpls(b *testing.B, impls []impl, server func() float64) {
	ctx := context.Background()
	if os.Getenv("LOCKBENCH_REVERSE") != "" {
		impls = slices.Clone(impls)
		slices.Reverse(impls)
	}
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0, srv0 := processCPU(), 0.0
			if server != nil {
				srv0 = server()
			}
			for b.Loop() {
				if err := im.op(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			if server != nil {
				b.ReportMetric((server()-srv0)*1e6/float64(b.N), "srv-cpu-µs/op")
			}
		})
	}
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// name returns a lock name of its own, also on a server other runs
// share.
func name(kind string) string { return fmt.Sprintf("lockbench-%s-%d", kind, time.Now().UnixNano()) }

// idgenImpls are idgen's rows over be: the backend, and a Locker on it.
func idgenImpls(b *testing.B, be lock.Backend) []impl {
	l, err := lock.New(be, lock.Options{})
	if err != nil {
		b.Fatal(err)
	}
	bn, ln := name("backend"), name("locker")
	return []impl{
		{"backend", func(ctx context.Context) error {
			g, err := be.Acquire(ctx, bn, "bench", ttl, false)
			if err != nil {
				return err
			}
			return be.Release(ctx, g)
		}},
		{"locker", func(ctx context.Context) error {
			le, err := l.TryAcquire(ctx, ln, "bench", ttl)
			if err != nil {
				return err
			}
			return le.Release(ctx)
		}},
	}
}

// handOff measures BenchmarkHandOff's rounds: holder takes the lock,
// waiter queues for it, holder releases.
func handOff(b *testing.B, holder, waiter lock.Backend) {
	b.Run("impl=backend", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		n := name("handoff")
		if _, err := handOffRound(ctx, holder, waiter, n); err != nil { // a waiter's first wait opens its listener
			b.Fatal(err)
		}
		var ds []time.Duration
		for b.Loop() {
			d, err := handOffRound(ctx, holder, waiter, n)
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, d)
		}
		slices.Sort(ds)
		ms := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / float64(time.Millisecond) }
		b.ReportMetric(ms(0.5), "p50-ms")
		b.ReportMetric(ms(0.9), "p90-ms")
	})
}

func handOffRound(ctx context.Context, holder, waiter lock.Backend, n string) (time.Duration, error) {
	g, err := holder.Acquire(ctx, n, "holder", ttl, false)
	if err != nil {
		return 0, err
	}
	type result struct {
		g   lock.Grant
		err error
		at  time.Time
	}
	ch := make(chan result, 1)
	go func() {
		g, err := waiter.Acquire(ctx, n, "waiter", ttl, true)
		ch <- result{g, err, time.Now()}
	}()
	err = testtime.WaitFor(time.Minute, time.Millisecond, func() error {
		info, err := holder.Describe(ctx, n)
		if err != nil || !slices.ContainsFunc(info.Waiters, func(w lock.Waiter) bool { return w.Owner == "waiter" }) {
			return cmp.Or(err, errors.New("the waiter is not queued"))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	time.Sleep(settle) // the scenario: a waiter queued this long before the release
	released := time.Now()
	if err := holder.Release(ctx, g); err != nil {
		return 0, err
	}
	r := <-ch
	if r.err != nil {
		return 0, fmt.Errorf("the waiter: %w", r.err)
	}
	if r.g.Token <= g.Token {
		return 0, fmt.Errorf("the waiter's token %d is not above the holder's %d", r.g.Token, g.Token)
	}
	return r.at.Sub(released), waiter.Release(ctx, r.g)
}

// SQL servers. Each open returns another Store on the same database,
// closed when b ends.

func openStore(b *testing.B, open func(ctx context.Context) (*store.Store, error)) *store.Store {
	b.Helper()
	ctx := context.Background()
	st, err := open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(ctx, nil); err != nil {
		b.Fatal(err)
	}
	return st
}

func openPostgres(b *testing.B) (st *store.Store, open func() *store.Store, dsn string) {
	srv := dbtest.Start(b, dbtest.Postgres)
	open = func() *store.Store {
		return openStore(b, func(ctx context.Context) (*store.Store, error) { return postgres.Open(ctx, srv.DSN) })
	}
	return open(), open, srv.DSN
}

func openMySQL(b *testing.B) (*store.Store, func() *store.Store) {
	srv := dbtest.Start(b, dbtest.MySQL)
	open := func() *store.Store {
		return openStore(b, func(ctx context.Context) (*store.Store, error) { return mysql.Open(ctx, srv.DSN) })
	}
	return open(), open
}

func openSQLite(b *testing.B) (*store.Store, func() *store.Store) {
	path := filepath.Join(b.TempDir(), "idgen.db")
	open := func() *store.Store {
		return openStore(b, func(ctx context.Context) (*store.Store, error) { return sqlite.Open(ctx, "sqlite://"+path) })
	}
	return open(), open
}

// The floor's table has the lock table's shape (migration 00016).
const (
	floorTable = `CREATE TABLE lockbench_floor (
    name       VARCHAR(200) NOT NULL,
    owner      VARCHAR(200) NOT NULL DEFAULT '',
    token      BIGINT NOT NULL DEFAULT 0,
    granted_at BIGINT NOT NULL DEFAULT 0,
    expires_at BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (name))`
	floorTableMySQL = `CREATE TABLE lockbench_floor (
    name       VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    owner      VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    token      BIGINT NOT NULL DEFAULT 0,
    granted_at BIGINT NOT NULL DEFAULT 0,
    expires_at BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (name)) ENGINE=InnoDB`
	// A free name is inserted; a lapsed row is taken over; a live one is
	// left alone (no row affected).
	floorTakePostgres = `INSERT INTO lockbench_floor (name, owner, token, granted_at, expires_at) VALUES ($1, $2, 1, $3, $4)
	ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, granted_at = excluded.granted_at, expires_at = excluded.expires_at
	WHERE lockbench_floor.expires_at <= excluded.granted_at`
	floorTakeSQLite = `INSERT INTO lockbench_floor (name, owner, token, granted_at, expires_at) VALUES (?, ?, 1, ?, ?)
	ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, granted_at = excluded.granted_at, expires_at = excluded.expires_at
	WHERE lockbench_floor.expires_at <= excluded.granted_at`
	floorTakeMySQL = `INSERT INTO lockbench_floor (name, owner, token, granted_at, expires_at) VALUES (?, ?, 1, ?, ?)
	ON DUPLICATE KEY UPDATE owner = IF(expires_at <= VALUES(granted_at), VALUES(owner), owner),
	expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)`
	floorFreePostgres = `DELETE FROM lockbench_floor WHERE name = $1 AND owner = $2`
	floorFree         = `DELETE FROM lockbench_floor WHERE name = ? AND owner = ?`
)

var errFloorHeld = errors.New("lockbench: the floor's lock is held")

// floorOp is the SQL floor over exec, which returns the rows affected.
func floorOp(take, free string, exec func(ctx context.Context, q string, args ...any) (int64, error)) op {
	n := name("floor")
	return func(ctx context.Context) error {
		now := time.Now().UnixMilli()
		got, err := exec(ctx, take, n, "bench", now, now+ttl.Milliseconds())
		if err != nil {
			return err
		}
		if got == 0 {
			return errFloorHeld
		}
		if got, err = exec(ctx, free, n, "bench"); err == nil && got != 1 {
			err = fmt.Errorf("lockbench: the floor's release deleted %d rows", got)
		}
		return err
	}
}

func postgresFloor(b *testing.B, dsn string) op {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn) // pgx, as the store's own pool
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, floorTable); err != nil {
		b.Fatal(err)
	}
	return floorOp(floorTakePostgres, floorFreePostgres, func(ctx context.Context, q string, args ...any) (int64, error) {
		tag, err := pool.Exec(ctx, q, args...)
		return tag.RowsAffected(), err
	})
}

// stdExec runs on the store's own database/sql pool.
func stdExec(db *sql.DB) func(ctx context.Context, q string, args ...any) (int64, error) {
	return func(ctx context.Context, q string, args ...any) (int64, error) {
		res, err := db.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
}

func mysqlFloor(b *testing.B, db *sql.DB) op {
	if _, err := db.Exec(floorTableMySQL); err != nil {
		b.Fatal(err)
	}
	return floorOp(floorTakeMySQL, floorFree, stdExec(db))
}

func sqliteFloor(b *testing.B, db *sql.DB) op {
	if _, err := db.Exec(floorTable); err != nil {
		b.Fatal(err)
	}
	return floorOp(floorTakeSQLite, floorFree, stdExec(db))
}

// Redis.

// startRedis starts a redis-server (no persistence) and returns a
// client of it, and a way to get more; all are closed when b ends.
func startRedis(b *testing.B) (*redis.Client, func() *redis.Client) {
	addr := dbtest.StartRedis(b)
	open := func() *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		b.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	return open(), open
}

func newRedisStore(b *testing.B, rdb *redis.Client) *redisstore.Store {
	s, err := redisstore.New(context.Background(), rdb, redisstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// redisCPU returns the server's used_cpu_user plus used_cpu_sys (INFO
// cpu), in seconds; 0 if it cannot be read.
func redisCPU(rdb *redis.Client) func() float64 {
	return func() float64 {
		info, err := rdb.Info(context.Background(), "cpu").Result()
		if err != nil {
			return 0
		}
		var sum float64
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if k == "used_cpu_user" || k == "used_cpu_sys" {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
		return sum
	}
}

// compareAndDelete is the release every Redis lock guide gives.
var compareAndDelete = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

func redisFloor(rdb *redis.Client) op {
	key := name("floor")
	return func(ctx context.Context) error {
		if err := rdb.Do(ctx, "SET", key, "bench", "NX", "PX", ttl.Milliseconds()).Err(); err != nil {
			return err // redis.Nil: held
		}
		n, err := compareAndDelete.Run(ctx, rdb, []string{key}, "bench").Int()
		if err == nil && n != 1 {
			err = errors.New("lockbench: the floor's release deleted nothing")
		}
		return err
	}
}

func redislockOp(rdb *redis.Client) op {
	c, key := redislock.New(rdb), name("redislock")
	return func(ctx context.Context) error {
		l, err := c.Obtain(ctx, key, ttl, nil)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
}

func redsyncOp(rdb *redis.Client) op {
	m := redsync.New(redsyncgoredis.NewPool(rdb)).NewMutex(name("redsync"), redsync.WithExpiry(ttl), redsync.WithTries(1))
	return func(ctx context.Context) error {
		if err := m.TryLockContext(ctx); err != nil {
			return err
		}
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("lockbench: redsync's unlock freed nothing")
		}
		return err
	}
}

// etcd.

// startEtcd starts a single-member etcd (Debian's etcd-server) and
// returns a client of it, and a way to get more; all are closed when b
// ends.
func startEtcd(b *testing.B) (*clientv3.Client, func() *clientv3.Client) {
	e := dbtest.StartEtcd(b)
	open := func() *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cli.Close() })
		return cli
	}
	return open(), open
}

func newEtcdStore(b *testing.B, cli *clientv3.Client) *etcdstore.Store {
	s, err := etcdstore.New(context.Background(), cli, etcdstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// etcdFloor is a bare concurrency.Mutex on a session made once: its key
// lives on the session's lease (no TTL per grant, no fenced release).
func etcdFloor(b *testing.B, cli *clientv3.Client) op {
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sess.Close() })
	m := concurrency.NewMutex(sess, name("floor"))
	return func(ctx context.Context) error {
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}
}
