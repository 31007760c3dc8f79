package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/lock/redisstore"
	"github.com/idgen/idgen/store/dbtest"
)

// exampleSocket is the unix socket of a redis-server that TestMain runs
// for the examples, which have no testing.TB to start one.
var exampleSocket string

func TestMain(m *testing.M) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if dbtest.Required() {
			fmt.Fprintln(os.Stderr, "no redis-server on PATH (apt-get install redis-server)")
			os.Exit(1)
		}
		fmt.Println("skipped: no redis-server on PATH")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "redisstore-example")
	if err != nil {
		panic(err)
	}
	exampleSocket = filepath.Join(dir, "redis.sock")
	// A socket rather than a port: no port to race other tests for.
	srv := exec.Command(bin, "--port", "0", "--unixsocket", exampleSocket, "--save", "", "--appendonly", "no", "--dir", dir)
	if err := srv.Start(); err != nil {
		panic(err)
	}
	listening := testtime.Until(time.Minute, time.Millisecond, func() bool {
		_, err := os.Stat(exampleSocket)
		return err == nil
	})
	code := 1
	if listening {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, "redis-server never opened", exampleSocket)
	}
	_ = srv.Process.Kill()
	_ = srv.Wait()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// One user's checkout under a lock, its balance written through the
// guard with the lease's token, and a write from a holder that lost
// the lock refused.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: exampleSocket})
	defer rdb.Close()
	st, err := redisstore.New(ctx, rdb, redisstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	locks, err := lock.New(st, lock.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}

	var first int64
	err = locks.Do(ctx, "checkout:user-7", "worker-1", 10*time.Second, func(ctx context.Context, le *lock.Lease) error {
		first = le.Token()
		return st.Guarded(ctx, "user-7", le.Token(), []any{"HSET", "{user-7}:balance", "cents", 1200})
	})
	fmt.Println("first checkout:", err)

	err = locks.Do(ctx, "checkout:user-7", "worker-2", 10*time.Second, func(ctx context.Context, le *lock.Lease) error {
		return st.Guarded(ctx, "user-7", le.Token(), []any{"HINCRBY", "{user-7}:balance", "cents", -200})
	})
	fmt.Println("second checkout:", err)

	// worker-1, paused past its lease, wakes and writes with its token.
	err = st.Guarded(ctx, "user-7", first, []any{"HSET", "{user-7}:balance", "cents", 1200})
	fmt.Println("late write refused:", errors.Is(err, lock.ErrStaleToken))
	fmt.Println("balance:", rdb.HGet(ctx, "{user-7}:balance", "cents").Val())
	// Output:
	// first checkout: <nil>
	// second checkout: <nil>
	// late write refused: true
	// balance: 1000
}
