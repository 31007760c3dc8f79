package redisdedup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/idempotency/dedup"
	"github.com/idgen/idgen/idempotency/dedup/redisdedup"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store/dbtest"
)

const hold = 300 * time.Millisecond

func newDeduper(t *testing.T, rdb redis.UniversalClient) *redisdedup.Deduper {
	t.Helper()
	d, err := redisdedup.New(context.Background(), rdb, redisdedup.Options{Hold: hold, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newRedis(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: dbtest.StartRedis(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

var errHandler = errors.New("handler failed")

// Deliveries of one message, one after the other: the handler runs until
// it succeeds once, and never after.
func TestDeduper_Do_Sequential(t *testing.T) {
	t.Parallel()
	d := newDeduper(t, newRedis(t))
	cases := []struct {
		name     string
		fails    []error
		wantErrs []error
		wantRuns int
	}{
		{name: "once", fails: []error{nil}, wantErrs: []error{nil}, wantRuns: 1},
		{name: "redelivered after success is skipped", fails: []error{nil, nil, nil},
			wantErrs: []error{nil, dedup.ErrProcessed, dedup.ErrProcessed}, wantRuns: 1},
		{name: "failed handler frees, redelivery runs", fails: []error{errHandler, nil, nil},
			wantErrs: []error{errHandler, nil, dedup.ErrProcessed}, wantRuns: 2},
		{name: "fails every time", fails: []error{errHandler, errHandler},
			wantErrs: []error{errHandler, errHandler}, wantRuns: 2},
	}
	ctx := context.Background()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runs := 0
			for j, fail := range c.fails {
				err := d.Do(ctx, "g", fmt.Sprint(i), func(context.Context) error {
					runs++
					return fail
				})
				if !errors.Is(err, c.wantErrs[j]) || (err != nil && c.wantErrs[j] == nil) {
					t.Fatalf("delivery %d: err %v, want %v", j, err, c.wantErrs[j])
				}
			}
			if runs != c.wantRuns {
				t.Errorf("handler ran %d times, want %d", runs, c.wantRuns)
			}
		})
	}
}

// A duplicate while the first runs is refused with ErrInFlight, even
// when the handler is slower than several holds: the watchdog renews.
func TestDeduper_Do_SlowHandlerKeepsItsHold(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	d := newDeduper(t, rdb)
	ctx := context.Background()
	start := time.Now()
	dups := 0
	err := d.Do(ctx, "g", "slow", func(hctx context.Context) error {
		// Four holds, with a duplicate at every poll of the wait.
		if !testtime.Until(10*time.Second, hold/5, func() bool {
			err := d.Do(ctx, "g", "slow", func(context.Context) error {
				t.Error("the duplicate ran beside the first")
				return nil
			})
			if !errors.Is(err, dedup.ErrInFlight) {
				t.Errorf("duplicate: %v, want ErrInFlight", err)
			}
			dups++
			return time.Since(start) > 4*hold
		}) {
			t.Error("the wait did not end")
		}
		return context.Cause(hctx)
	})
	if err != nil {
		t.Fatalf("slow handler: %v", err)
	}
	if dups < 5 {
		t.Errorf("%d duplicates tried, want at least 5", dups)
	}
	if err := d.Do(ctx, "g", "slow", func(context.Context) error { return nil }); !errors.Is(err, dedup.ErrProcessed) {
		t.Fatalf("after: %v, want ErrProcessed", err)
	}
	// Done is kept for the retention, not the hold.
	ttl, err := rdb.PTTL(ctx, redisdedup.DefaultPrefix+"1:g:slow").Result()
	if err != nil || ttl < 59*time.Minute {
		t.Fatalf("TTL of the done key: %v, %v; want about an hour", ttl, err)
	}
}

// A handler whose hold is lost (here its key deleted under it) has its
// context ended with ErrHoldLost, Do returns it, and the message is not
// marked: its redelivery runs.
func TestDeduper_Do_HoldLost(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	d := newDeduper(t, rdb)
	ctx := context.Background()
	err := d.Do(ctx, "g", "lost", func(hctx context.Context) error {
		if err := rdb.Del(ctx, redisdedup.DefaultPrefix+"1:g:lost").Err(); err != nil {
			return err
		}
		select {
		case <-hctx.Done():
		case <-time.After(10 * time.Second):
			t.Error("the handler's context did not end")
		}
		if c := context.Cause(hctx); !errors.Is(c, dedup.ErrHoldLost) {
			t.Errorf("cause %v, want ErrHoldLost", c)
		}
		return nil
	})
	if !errors.Is(err, dedup.ErrHoldLost) {
		t.Fatalf("Do: %v, want ErrHoldLost", err)
	}
	ran := false
	if err := d.Do(ctx, "g", "lost", func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("redelivery: ran %v, err %v; want it run", ran, err)
	}
}

// A consumer that died in flight blocks its message for one hold, then
// the redelivery runs.
func TestDeduper_Do_DeadConsumerExpires(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	d := newDeduper(t, rdb)
	ctx := context.Background()
	// What a consumer killed mid-handler leaves behind.
	if err := rdb.Set(ctx, redisdedup.DefaultPrefix+"1:g:dead", "p:gone", hold).Err(); err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := testtime.WaitFor(10*time.Second, hold/10, func() error {
		return d.Do(ctx, "g", "dead", func(context.Context) error { ran = true; return nil })
	}); err != nil || !ran {
		t.Fatalf("redelivery: ran %v, err %v", ran, err)
	}
}

// A panicking handler frees the message.
func TestDeduper_Do_Panic(t *testing.T) {
	t.Parallel()
	d := newDeduper(t, newRedis(t))
	ctx := context.Background()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("no panic")
			}
		}()
		_ = d.Do(ctx, "g", "panic", func(context.Context) error { panic("boom") })
	}()
	ran := false
	if err := d.Do(ctx, "g", "panic", func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("redelivery: ran %v, err %v", ran, err)
	}
}

// On a Redis Cluster every message's key is served by its own slot's
// master: each script names one key.
func TestDeduper_Do_Cluster(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: dbtest.StartRedisCluster(t, 3)})
	t.Cleanup(func() { _ = rdb.Close() })
	d := newDeduper(t, rdb)
	ctx := context.Background()
	for _, g := range []string{"billing", "shipping"} {
		for i := range 50 {
			key := fmt.Sprintf("msg-%d", i)
			if err := d.Do(ctx, g, key, func(context.Context) error { return nil }); err != nil {
				t.Fatalf("%s/%s: %v", g, key, err)
			}
			if err := d.Do(ctx, g, key, func(context.Context) error { return nil }); !errors.Is(err, dedup.ErrProcessed) {
				t.Fatalf("%s/%s again: %v, want ErrProcessed", g, key, err)
			}
		}
	}
	// The keys landed on every master.
	var masters atomic.Int32
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := c.DBSize(ctx).Result()
		if n > 0 {
			masters.Add(1)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if masters := masters.Load(); masters != 3 {
		t.Errorf("keys on %d masters, want 3", masters)
	}
}

func TestDeduper_Do_Invalid(t *testing.T) {
	t.Parallel()
	d := newDeduper(t, newRedis(t))
	cases := []struct {
		group, key string
		want       error
	}{
		{"", "k", dedup.ErrInvalidGroup},
		{"g", "", dedup.ErrInvalidKey},
		{"g", strings.Repeat("k", dedup.MaxKeyLen+1), dedup.ErrInvalidKey},
	}
	for _, c := range cases {
		err := d.Do(context.Background(), c.group, c.key, func(context.Context) error {
			t.Error("handler ran")
			return nil
		})
		if !errors.Is(err, c.want) {
			t.Errorf("Do(%q, %q): %v, want %v", c.group, c.key, err, c.want)
		}
	}
}

func TestNew_Options(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	cases := []struct {
		name string
		opts redisdedup.Options
		ok   bool
	}{
		{"defaults", redisdedup.Options{}, true},
		{"hold too short", redisdedup.Options{Hold: 10 * time.Millisecond}, false},
		{"retention below hold", redisdedup.Options{Hold: time.Minute, Retention: time.Second}, false},
	}
	for _, c := range cases {
		_, err := redisdedup.New(context.Background(), rdb, c.opts)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
	if _, err := redisdedup.New(context.Background(), nil, redisdedup.Options{}); err == nil {
		t.Error("nil client accepted")
	}
	if err := rdb.ConfigSet(context.Background(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := redisdedup.New(context.Background(), rdb, redisdedup.Options{}); !errors.Is(err, redisdedup.ErrEvictionPolicy) {
		t.Errorf("allkeys-lru: %v, want ErrEvictionPolicy", err)
	}
}
