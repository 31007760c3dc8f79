package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/store/dbtest"
)

// newService runs the order service on a fresh SQLite store.
func newService(t *testing.T) (*service, string) {
	t.Helper()
	ctx := context.Background()
	s, err := open(ctx, Config{DSN: "sqlite://" + filepath.Join(t.TempDir(), "orders.db"), LockWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ts := httptest.NewServer(s.routes())
	t.Cleanup(ts.Close)
	return s, ts.URL
}

type answer struct {
	status   int
	out      orderOut
	replayed bool
	err      error
}

func order(ctx context.Context, url, user, key string) answer {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/orders", bytes.NewReader([]byte(`{"item":"book","qty":1}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", user)
	req.Header.Set(idempotency.KeyHeader, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	var a answer
	a.status, a.replayed = resp.StatusCode, resp.Header.Get(idempotency.ReplayedHeader) == "true"
	_ = json.NewDecoder(resp.Body).Decode(&a.out)
	return a
}

func count(t *testing.T, s *service, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(s.sql(q), args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A double click (one key, twice at once) places one order and answers
// both with it.
func TestOrders_DoubleClick(t *testing.T) {
	t.Parallel()
	s, url := newService(t)
	var wg sync.WaitGroup
	var clicks [2]answer
	for i := range clicks {
		wg.Go(func() { clicks[i] = order(context.Background(), url, "ann", "click-1") })
	}
	wg.Wait()
	a, b := clicks[0], clicks[1]
	if a.status != 201 || b.status != 201 || a.out.ID == "" || a.out.ID != b.out.ID || a.replayed == b.replayed {
		t.Fatalf("double click: %+v and %+v; want one order, answered twice (once replayed)", a, b)
	}
	if n := count(t, s, `SELECT COUNT(*) FROM orders WHERE user_id = ?`, "ann"); n != 1 {
		t.Fatalf("%d orders after a double click, want 1", n)
	}
}

// A client that times out while its order waits for the user's lock
// retries with the same key: one order in the end, whichever attempt
// placed it.
func TestOrders_RetryAfterTimeout(t *testing.T) {
	t.Parallel()
	s, url := newService(t)
	ctx := context.Background()
	// Another order of bob's holds his lock.
	le, err := s.locks.Acquire(ctx, "user:bob", "test", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	first := order(tctx, url, "bob", "retry-1")
	cancel()
	if first.err == nil {
		t.Fatalf("the order came back while bob's lock was held: %+v", first)
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var retry answer
	for range 50 { // until the first attempt has let the key go
		if retry = order(ctx, url, "bob", "retry-1"); retry.status != http.StatusConflict {
			break
		}
	}
	again := order(ctx, url, "bob", "retry-1")
	if retry.status != 201 || again.status != 201 || again.out.ID != retry.out.ID || !again.replayed {
		t.Fatalf("retries after the timeout: %+v then %+v; want one order, replayed", retry, again)
	}
	if n := count(t, s, `SELECT COUNT(*) FROM orders WHERE user_id = ?`, "bob"); n != 1 {
		t.Fatalf("%d orders of one key after a timeout and retries, want 1", n)
	}
}

// Concurrent orders of one user run one at a time: the read-then-write
// count of the user's orders loses none, each order has a token of its
// own, and every write was admitted by the guard.
func TestOrders_OneUserConcurrently(t *testing.T) {
	t.Parallel()
	s, url := newService(t)
	const n = 16
	var wg sync.WaitGroup
	answers := make([]answer, n)
	for i := range n {
		wg.Go(func() { answers[i] = order(context.Background(), url, "cat", fmt.Sprintf("cat-%d", i)) })
	}
	wg.Wait()
	tokens := map[string]bool{}
	for i, a := range answers {
		if a.status != 201 {
			t.Fatalf("order %d: %+v", i, a)
		}
		if tokens[a.out.Token] {
			t.Fatalf("order %d: token %s given twice", i, a.out.Token)
		}
		tokens[a.out.Token] = true
	}
	rows := count(t, s, `SELECT COUNT(*) FROM orders WHERE user_id = ?`, "cat")
	counted := count(t, s, `SELECT orders FROM users WHERE user_id = ?`, "cat")
	outbox := count(t, s, `SELECT COUNT(*) FROM outbox`)
	if rows != n || counted != n || outbox != n {
		t.Fatalf("%d concurrent orders of one user: %d rows, counted %d, %d outbox rows; want %d each", n, rows, counted, outbox, n)
	}
}

// A holder whose lock was taken over while it paused cannot write: the
// guard refuses its token once a newer holder wrote.
func TestOrders_StaleHolderIsRefused(t *testing.T) {
	t.Parallel()
	s, url := newService(t)
	ctx := context.Background()
	first, second := order(ctx, url, "dan", "dan-1"), order(ctx, url, "dan", "dan-2")
	stale, err := strconv.ParseInt(first.out.Token, 10, 64)
	newer, err2 := strconv.ParseInt(second.out.Token, 10, 64)
	if first.status != 201 || second.status != 201 || err != nil || err2 != nil || stale >= newer {
		t.Fatalf("two orders: %+v, %+v", first, second)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error { return s.guard.Check(ctx, tx, "user:dan", stale) })
	if !errors.Is(err, lock.ErrStaleToken) {
		t.Fatalf("a write with the first order's token after the second's: %v, want lock.ErrStaleToken", err)
	}
}

// The outbox reaches the consumer at least once and ships each order
// exactly once: the relay publishes some orders twice (it crashed
// between publishing and marking them sent), and a consumer dies after
// shipping some orders but before acknowledging them, whose messages
// another claims.
func TestOrders_OutboxShipsEachOrderOnce(t *testing.T) {
	t.Parallel()
	s, url := newService(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 20
	var first string
	for i := range n {
		a := order(ctx, url, fmt.Sprintf("u%d", i%3), fmt.Sprintf("k%d", i))
		if a.status != 201 {
			t.Fatalf("order %d: %+v", i, a)
		}
		if i == 0 {
			first = a.out.ID
		}
	}
	if st := shipped(t, url, first); st != 0 {
		t.Fatalf("order %s: shipped %d before any relay ran", first, st)
	}
	p, err := newPipeline(ctx, s, dbtest.StartRedis(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	p.claimIdle = 100 * time.Millisecond
	relayAll := func() {
		t.Helper()
		for {
			k, err := p.relayOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				return
			}
		}
	}
	relayAll()
	// The relay's crash: half the outbox is published again.
	if _, err := s.db.ExecContext(ctx, s.sql(`UPDATE outbox SET sent = 0 WHERE id <= ?`), n/2); err != nil {
		t.Fatal(err)
	}
	relayAll()
	// A consumer that ships five orders and dies before acknowledging.
	if err := p.rdb.XGroupCreateMkStream(ctx, stream, group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := p.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "dead", Streams: []string{stream, ">"}, Count: 5}).Result()
	if err != nil || len(res) != 1 || len(res[0].Messages) != 5 {
		t.Fatalf("the dying consumer's read: %v, %v", res, err)
	}
	for _, m := range res[0].Messages {
		if err := p.ship(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- p.Consume(ctx, "live") }()
	settled := testtime.Until(30*time.Second, 20*time.Millisecond, func() bool {
		pending, err := p.rdb.XPending(ctx, stream, group).Result()
		read, _ := p.rdb.XInfoGroups(ctx, stream).Result()
		return err == nil && pending.Count == 0 && len(read) == 1 && read[0].EntriesRead == n+n/2
	})
	cancel()
	// Consume may be blocked for a second in XREADGROUP, which does not
	// heed ctx: closing the client ends the read now.
	p.Close()
	<-done
	if !settled {
		t.Fatal("the consumer did not read and acknowledge every message within 30 s")
	}
	ships := count(t, s, `SELECT COUNT(*) FROM shipments`)
	orders := count(t, s, `SELECT COUNT(DISTINCT order_id) FROM shipments`)
	if ships != n || orders != n {
		t.Fatalf("%d messages for %d orders: %d shipments of %d orders; want each order shipped once", n+n/2, n, ships, orders)
	}
	// The count the compose stack test reads from outside.
	if st := shipped(t, url, first); st != 1 {
		t.Fatalf("GET /orders/%s: shipped %d, want 1", first, st)
	}
}

// shipped is GET /orders/{id}'s count of the order's shipments.
func shipped(t *testing.T, url, id string) int {
	t.Helper()
	resp, err := http.Get(url + "/orders/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st orderState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK || st.ID != id {
		t.Fatalf("GET /orders/%s: %s, %+v, %v", id, resp.Status, st, err)
	}
	return st.Shipped
}

// `orders health`, the image's health check, passes against /readyz and
// fails against a port that does not answer.
func TestOrders_Health(t *testing.T) {
	_, url := newService(t)
	if err := health([]string{"-url", url + "/readyz"}); err != nil {
		t.Fatalf("health of a serving service: %v", err)
	}
	if err := health([]string{"-url", url + "/nowhere"}); err == nil {
		t.Fatal("health of a 404 passed")
	}
	if err := health([]string{"-url", "http://127.0.0.1:9/readyz"}); err == nil {
		t.Fatal("health of a closed port passed")
	}
}

// Without -url, `orders health` probes the address the server listens
// on: -addr, else ORDERS_ADDR, a wildcard host reached on loopback.
func TestOrders_HealthFollowsListenAddress(t *testing.T) {
	_, srv := newService(t)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ addr, want string }{
		{"0.0.0.0:" + port, "http://127.0.0.1:" + port + "/readyz"},
		{":" + port, "http://127.0.0.1:" + port + "/readyz"},
		{"[::]:" + port, "http://127.0.0.1:" + port + "/readyz"},
		{"127.0.0.1:" + port, "http://127.0.0.1:" + port + "/readyz"},
		{"[::1]:8081", "http://[::1]:8081/readyz"},
		{"orders.internal:8081", "http://orders.internal:8081/readyz"},
	} {
		if got, err := probeURL(tc.addr); err != nil || got != tc.want {
			t.Errorf("probeURL(%q) = %q, %v; want %q", tc.addr, got, err, tc.want)
		}
	}
	for _, bad := range []string{"8081", "127.0.0.1:", ""} {
		if got, err := probeURL(bad); err == nil {
			t.Errorf("probeURL(%q) = %q; want an error", bad, got)
		}
	}

	t.Setenv("ORDERS_ADDR", "0.0.0.0:"+port)
	if err := health(nil); err != nil {
		t.Fatalf("health with ORDERS_ADDR=0.0.0.0:%s, where the service listens: %v", port, err)
	}
	if err := health([]string{"-addr", ":9"}); err == nil {
		t.Fatal("health with -addr :9 passed: -addr must win over ORDERS_ADDR")
	}
	t.Setenv("ORDERS_ADDR", "0.0.0.0:9")
	if err := health(nil); err == nil {
		t.Fatal("health with ORDERS_ADDR=0.0.0.0:9 passed: it probed another port")
	}
	if err := health([]string{"-addr", "0.0.0.0:" + port}); err != nil {
		t.Fatalf("health with -addr 0.0.0.0:%s: %v", port, err)
	}
}
