package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/idempotency/middleware"
	"github.com/idgen/idgen/idempotency/redisstore"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/mysql"
	"github.com/idgen/idgen/store/postgres"
	"github.com/idgen/idgen/store/sqlite"
	"github.com/idgen/idgen/store/storetest"
)

// stores opens each store the middleware runs on: SQLite, PostgreSQL,
// MariaDB (the last two in containers) and a real redis-server.
var stores = []struct {
	name string
	open func(t testing.TB) idempotency.Store
}{
	{"sqlite", func(t testing.TB) idempotency.Store {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "idgen.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		if _, err := st.Migrate(ctx, nil); err != nil {
			t.Fatal(err)
		}
		return st.Idempotency()
	}},
	{"postgres", func(t testing.TB) idempotency.Store {
		return storetest.Migrated(t, dbtest.Postgres, postgres.Open).Idempotency()
	}},
	{"mariadb", func(t testing.TB) idempotency.Store {
		return storetest.Migrated(t, dbtest.MySQL, mysql.Open).Idempotency()
	}},
	{"redis", func(t testing.TB) idempotency.Store {
		rdb := redis.NewClient(&redis.Options{Addr: dbtest.StartRedis(t)})
		t.Cleanup(func() { _ = rdb.Close() })
		st, err := redisstore.New(context.Background(), rdb, redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

// things is a business handler: it creates a thing per call, numbered,
// at a Location; the first call, if its body is "slow", waits for
// release, and a body of "fail" answers 500.
type things struct {
	calls   atomic.Int64
	release chan struct{}
	started chan struct{}
}

func (h *things) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n := h.calls.Add(1)
	switch string(body) {
	case "slow":
		if n == 1 {
			h.started <- struct{}{}
			<-h.release
		}
	case "fail":
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Location", fmt.Sprintf("/things/%d", n))
	w.Header().Set("X-Not-Recorded", "1")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"thing":%d,"body":%q}`, n, body)
}

type reply struct {
	status             int
	body, code, replay string
	header             http.Header
}

func post(t *testing.T, url, key, body string, hdr ...string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set(idempotency.KeyHeader, key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal(b, &e)
	return reply{resp.StatusCode, string(b), e.Error.Code, resp.Header.Get(idempotency.ReplayedHeader), resp.Header}
}

func newServer(t *testing.T, st idempotency.Store, cfg idempotency.Config) (*httptest.Server, *things) {
	t.Helper()
	k, err := idempotency.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	m, err := middleware.New(k, middleware.Options{
		Headers: []string{"Location"},
		Scope: func(r *http.Request) (string, error) {
			if u := r.Header.Get("X-User"); u != "" {
				return "user:" + u, nil
			}
			return "", fmt.Errorf("no user")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &things{release: make(chan struct{}), started: make(chan struct{}, 4)}
	ts := httptest.NewServer(m.Handler(h))
	t.Cleanup(ts.Close)
	return ts, h
}

// Replay, 422, 409, TTL, scopes, 5xx and the owner-only completion, on
// every store.
func TestMiddleware_Stores(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			st := s.open(t)
			// Each case gets its keys' own prefix: the stores are shared.
			t.Run("Replay", func(t *testing.T) {
				ts, h := newServer(t, st, idempotency.Config{})
				first := post(t, ts.URL+"/things", "replay-1", "a", "X-User", "ann")
				again := post(t, ts.URL+"/things", "replay-1", "a", "X-User", "ann")
				if first.status != 201 || first.replay != "" || again.status != 201 || again.body != first.body ||
					again.replay != "true" || again.header.Get("Location") != first.header.Get("Location") || h.calls.Load() != 1 {
					t.Fatalf("first %+v, again %+v after %d calls; want one call and the replay", first, again, h.calls.Load())
				}
				if again.header.Get("X-Not-Recorded") != "" {
					t.Errorf("a header not chosen was replayed")
				}
				// Another caller's same key is its own.
				if bob := post(t, ts.URL+"/things", "replay-1", "a", "X-User", "bob"); bob.replay != "" || h.calls.Load() != 2 {
					t.Fatalf("another caller's key: %+v; want a first answer", bob)
				}
				// A caller the application does not know is refused.
				if anon := post(t, ts.URL+"/things", "replay-1", "a"); anon.status != 401 {
					t.Fatalf("no caller: %+v; want 401", anon)
				}
				// No key: straight through, every time.
				post(t, ts.URL+"/things", "", "a", "X-User", "ann")
				post(t, ts.URL+"/things", "", "a", "X-User", "ann")
				if h.calls.Load() != 4 {
					t.Fatalf("%d calls; want 4", h.calls.Load())
				}
			})
			t.Run("Reused422", func(t *testing.T) {
				ts, _ := newServer(t, st, idempotency.Config{})
				post(t, ts.URL+"/things", "reuse-1", "a", "X-User", "ann")
				for _, tc := range []struct{ path, body string }{{"/things", "b"}, {"/other", "a"}, {"/things?x=1", "a"}} {
					if r := post(t, ts.URL+tc.path, "reuse-1", tc.body, "X-User", "ann"); r.status != 422 || r.code != "idempotency_key_reused" {
						t.Fatalf("%s %q under the key of another request: %+v; want 422", tc.path, tc.body, r)
					}
				}
			})
			t.Run("InFlight409", func(t *testing.T) {
				ts, h := newServer(t, st, idempotency.Config{InFlightWait: 20 * time.Millisecond})
				done := make(chan reply, 1)
				go func() { done <- post(t, ts.URL+"/things", "flight-1", "slow", "X-User", "ann") }()
				<-h.started
				r := post(t, ts.URL+"/things", "flight-1", "slow", "X-User", "ann")
				if r.status != 409 || r.code != "idempotency_key_in_flight" || r.header.Get("Retry-After") != "1" {
					t.Fatalf("repeat in flight: %+v; want 409 with Retry-After 1", r)
				}
				close(h.release)
				first := <-done
				if again := post(t, ts.URL+"/things", "flight-1", "slow", "X-User", "ann"); again.body != first.body || again.replay != "true" || h.calls.Load() != 1 {
					t.Fatalf("after: %+v; want the first's answer %q replayed after one call", again, first.body)
				}
			})
			t.Run("TTL", func(t *testing.T) {
				c := newClock()
				ts, h := newServer(t, st, idempotency.Config{Now: c.Now})
				first := post(t, ts.URL+"/things", "ttl-1", "a", "X-User", "ann", idempotency.TTLHeader, "1")
				c.Advance(1100 * time.Millisecond)
				after := post(t, ts.URL+"/things", "ttl-1", "a", "X-User", "ann")
				if after.status != 201 || after.replay != "" || after.body == first.body || h.calls.Load() != 2 {
					t.Fatalf("after the TTL: %+v (first %q); want a new answer", after, first.body)
				}
			})
			t.Run("ServerErrorsAreNotRecorded", func(t *testing.T) {
				ts, h := newServer(t, st, idempotency.Config{})
				for range 2 {
					if r := post(t, ts.URL+"/things", "fail-1", "fail", "X-User", "ann"); r.status != 500 || r.replay != "" {
						t.Fatalf("failing handler: %+v; want its 500, not a replay", r)
					}
				}
				if h.calls.Load() != 2 {
					t.Fatalf("%d calls; want the retry to run the handler again", h.calls.Load())
				}
			})
			t.Run("SlowHandlerRunsOnce", func(t *testing.T) {
				// The first request runs past its 1s lock: its hold is
				// renewed, so a retry then is told to wait, not run.
				rs := &renewals{Store: st, ok: make(chan struct{}, 64)}
				ts, h := newServer(t, rs, idempotency.Config{LockTimeout: time.Second, InFlightWait: -1})
				done := make(chan reply, 1)
				start := time.Now()
				go func() { done <- post(t, ts.URL+"/things", "slow-1", "slow", "X-User", "ann") }()
				<-h.started
				for range 4 { // 4 renewals a third of the lock apart: past the lock
					<-rs.ok
				}
				retry := post(t, ts.URL+"/things", "slow-1", "slow", "X-User", "ann")
				if retry.status != 409 || retry.code != "idempotency_key_in_flight" {
					t.Fatalf("retry %v after the first began, past its lock: %+v; want 409", time.Since(start), retry)
				}
				close(h.release)
				first := <-done
				again := post(t, ts.URL+"/things", "slow-1", "slow", "X-User", "ann")
				if first.status != 201 || again.body != first.body || again.replay != "true" || h.calls.Load() != 1 {
					t.Fatalf("first %+v, again %+v after %d calls; want the one call's answer replayed", first, again, h.calls.Load())
				}
				t.Logf("a handler of %v behind a 1s lock ran %d time(s)", time.Since(start).Round(10*time.Millisecond), h.calls.Load())
			})
			t.Run("OwnerOnlyCompletes", func(t *testing.T) {
				// The first request outlives its 1s lock on a store that
				// stopped renewing; a retry takes the key over and
				// completes. When the first returns, its answer is
				// dropped for the one on record.
				c := newClock()
				ts, h := newServer(t, &renewals{Store: st, fail: true}, idempotency.Config{LockTimeout: time.Second, InFlightWait: -1, Now: c.Now})
				done := make(chan reply, 1)
				go func() { done <- post(t, ts.URL+"/things", "owner-1", "slow", "X-User", "ann") }()
				<-h.started
				c.Advance(1100 * time.Millisecond)
				retry := post(t, ts.URL+"/things", "owner-1", "slow", "X-User", "ann")
				if retry.status != 201 || retry.replay != "" {
					t.Fatalf("retry after the lock: %+v; want it to take the key over", retry)
				}
				close(h.release)
				old := <-done
				if old.replay != "true" || old.body != retry.body {
					t.Fatalf("the old owner: %+v; want the answer on record %q, replayed", old, retry.body)
				}
				if again := post(t, ts.URL+"/things", "owner-1", "slow", "X-User", "ann"); again.body != retry.body || h.calls.Load() != 2 {
					t.Fatalf("on record: %q after %d calls; want %q after 2", again.body, h.calls.Load(), retry.body)
				}
			})
		})
	}
}

// renewals passes renewals on to a Store and tells ok of each that
// succeeded; with fail, it fails them all, as a store cut off would.
type renewals struct {
	idempotency.Store
	ok   chan struct{}
	fail bool
}

func (r *renewals) Renew(ctx context.Context, scope, key, owner string, until time.Time) (bool, error) {
	if r.fail {
		return false, errors.New("renewals: cut off")
	}
	ok, err := r.Store.Renew(ctx, scope, key, owner, until)
	if ok && r.ok != nil {
		select {
		case r.ok <- struct{}{}:
		default:
		}
	}
	return ok, err
}

// newClock returns a fake clock from now, moved by hand: a key's TTL or
// lock passes without a wait.
func newClock() *testtime.Clock { return testtime.New(time.Now()) }
