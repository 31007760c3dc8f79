package client_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	_ "modernc.org/sqlite" // the orders table of the example

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/store/sqlite"
)

// keyedServer is a real idgen server on SQLite that keeps keys in the
// same file, as `idgen serve` does.
func keyedServer(t testing.TB, path string) *httptest.Server {
	t.Helper()
	ts, stop, err := startKeyedServer(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return ts
}

func startKeyedServer(path string) (ts *httptest.Server, stop func(), err error) {
	ctx := context.Background()
	var closers []func() error
	stop = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, st.Close)
	if _, err := st.Migrate(ctx, nil); err != nil {
		return nil, nil, err
	}
	alloc, err := segment.New(st, segment.Options{AutoCreate: true})
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, alloc.Close)
	k, err := idempotency.New(st.Idempotency(), idempotency.Config{})
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, k.Close)
	h, err := server.New(server.Config{Segment: alloc, Ranges: alloc, Idempotency: k})
	if err != nil {
		return nil, nil, err
	}
	ts = httptest.NewServer(h)
	closers = append(closers, func() error { ts.Close(); return nil })
	return ts, stop, nil
}

// Over either transport (the key a header over HTTP, metadata with
// WithGRPC): a repeat replays, a reused key is refused, as is a key of
// the other transport, a bad key fails before any call, and the range
// cache ignores the key.
func TestClient_IdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		opts, other []client.Option
	}{
		{"http", nil, []client.Option{client.WithGRPC()}},
		{"grpc", []client.Option{client.WithGRPC()}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := keyedServer(t, filepath.Join(t.TempDir(), "idgen.db"))
			var calls atomic.Int64
			base := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				ts.Config.Handler.ServeHTTP(w, r)
			})).URL
			c, err := client.New(base, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			kctx := client.WithIdempotencyKey(ctx, "order-42")
			a, err := c.NextN(kctx, "order", 3)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.NextN(ctx, "order", 5); err != nil { // unkeyed calls move on
				t.Fatal(err)
			}
			b, err := c.NextN(kctx, "order", 3)
			if err != nil || fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("repeat: %v %v; want %v", b, err, a)
			}
			if _, err := c.Next(kctx, "order"); !errors.Is(err, idempotency.ErrKeyReused) || !errors.Is(err, client.ErrBadRequest) {
				t.Fatalf("reused key: %v; want idempotency.ErrKeyReused", err)
			}
			other, _ := client.New(base, tc.other...)
			if _, err := other.NextN(kctx, "order", 3); !errors.Is(err, idempotency.ErrKeyReused) {
				t.Fatalf("the key over the other transport: %v; want idempotency.ErrKeyReused", err)
			}
			calls.Store(0)
			if _, err := c.Next(client.WithIdempotencyKey(ctx, "caf\u00e9"), "order"); !errors.Is(err, idempotency.ErrInvalidKey) || calls.Load() != 0 {
				t.Fatalf("bad key: %v after %d calls; want idempotency.ErrInvalidKey before any call", err, calls.Load())
			}
			// Segment's ranges ignore the key: two reservations, two ranges.
			seg, err := c.Segment(segment.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer seg.Close()
			x, _ := seg.Next(kctx, "other")
			if y, _ := seg.Next(kctx, "other"); x == y {
				t.Fatalf("the range cache replayed %d", x)
			}
		})
	}
}

// A 409 in flight is waited out, then the first answer comes back.
func TestClient_IdempotencyInFlightIsRetried(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") != "k" {
			t.Errorf("attempt without the key: %v", r.Header)
		}
		if calls.Add(1) < 3 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":{"code":"idempotency_key_in_flight","message":"wait"}}`))
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		_, _ = w.Write([]byte(`{"tag":"t","id":"77"}`))
	})
	ts := httptest.NewServer(h)
	defer ts.Close()
	c, _ := client.New(ts.URL, client.WithBackoff(time.Millisecond, 5*time.Millisecond))
	id, err := c.Next(client.WithIdempotencyKey(context.Background(), "k"), "t")
	if err != nil || id != 77 || calls.Load() != 3 {
		t.Fatalf("%d %v after %d calls; want 77 after 3", id, err, calls.Load())
	}
}

// The order-service pattern: the service passes its caller's
// idempotency key to idgen, so a retried order gets the ID it had, and
// the orders table's primary key turns the duplicate into an error
// instead of a second order.
func ExampleWithIdempotencyKey() {
	dir, _ := os.MkdirTemp("", "idgen-example")
	defer os.RemoveAll(dir)
	ts, stop, err := startKeyedServer(filepath.Join(dir, "idgen.db"))
	if err != nil {
		panic(err)
	}
	defer stop()
	ids, _ := client.New(ts.URL)
	orders, _ := sql.Open("sqlite", filepath.Join(dir, "orders.db"))
	defer orders.Close()
	_, _ = orders.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`)

	createOrder := func(ctx context.Context, clientKey, item string) (int64, error) {
		id, err := ids.Next(client.WithIdempotencyKey(ctx, "order:"+clientKey), "order")
		if err != nil {
			return 0, err
		}
		_, err = orders.ExecContext(ctx, `INSERT INTO orders (id, item) VALUES (?, ?)`, id, item)
		return id, err
	}
	ctx := context.Background()
	first, err := createOrder(ctx, "c7f1", "book")
	fmt.Println("first order:", first, err)
	// The caller timed out before it saw the answer, and retries with
	// the same key: same ID, and the primary key refuses a second row.
	again, err := createOrder(ctx, "c7f1", "book")
	fmt.Println("retry got the same ID:", again == first)
	fmt.Println("retry refused by the primary key:", err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed"))
	var n int
	_ = orders.QueryRow(`SELECT COUNT(*) FROM orders`).Scan(&n)
	fmt.Println("orders:", n)
	// Output:
	// first order: 1 <nil>
	// retry got the same ID: true
	// retry refused by the primary key: true
	// orders: 1
}

// inFlightRPC answers Next with ABORTED idempotency_key_in_flight until
// its third call, as a server does while the key's first call runs.
type inFlightRPC struct {
	idgenv1connect.UnimplementedIDServiceHandler
	t     *testing.T
	calls atomic.Int32
}

func (h *inFlightRPC) Next(_ context.Context, req *connect.Request[idgenv1.NextRequest]) (*connect.Response[idgenv1.NextResponse], error) {
	if req.Header().Get("Idempotency-Key") != "k" {
		h.t.Errorf("call without the key: %v", req.Header())
	}
	if h.calls.Add(1) < 3 {
		ce := connect.NewError(connect.CodeAborted, errors.New("wait"))
		for _, m := range []proto.Message{&errdetails.ErrorInfo{Reason: "idempotency_key_in_flight", Domain: server.ErrorDomain},
			&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Millisecond)}} {
			d, err := connect.NewErrorDetail(m)
			if err != nil {
				return nil, err
			}
			ce.AddDetail(d)
		}
		return nil, ce
	}
	resp := connect.NewResponse(&idgenv1.NextResponse{Tag: req.Msg.GetTag(), Ids: []int64{77}})
	resp.Header().Set("Idempotent-Replayed", "true")
	return resp, nil
}

// ABORTED in flight is waited out, then the first call's answer comes
// back.
func TestGRPC_IdempotencyInFlightIsRetried(t *testing.T) {
	t.Parallel()
	h := &inFlightRPC{t: t}
	_, rpc := idgenv1connect.NewIDServiceHandler(h)
	ts := serve(t, rpc)
	c, _ := client.New(ts.URL, client.WithGRPC(), client.WithBackoff(time.Millisecond, 5*time.Millisecond))
	id, err := c.Next(client.WithIdempotencyKey(context.Background(), "k"), "t")
	if err != nil || id != 77 || h.calls.Load() != 3 {
		t.Fatalf("%d %v after %d calls; want 77 after 3", id, err, h.calls.Load())
	}
}

// statusLog records each answer's status, whether it was a replay, and
// how long the server took.
type statusLog struct {
	mu  sync.Mutex
	all []served
}

type served struct {
	status   int
	replayed bool
	took     time.Duration
}

type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(s int) { r.status = s; r.ResponseWriter.WriteHeader(s) }

func (l *statusLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		l.mu.Lock()
		l.all = append(l.all, served{rec.status, w.Header().Get(idempotency.ReplayedHeader) == "true", time.Since(start)})
		l.mu.Unlock()
	})
}

// Two simultaneous calls with one key through the client: one
// allocates, and the other gets its replay from the server's wait for
// the first (DefaultInFlightWait, half a second), without a 409 and a
// Retry-After round trip, so within a second. The bound is checked by
// its mechanism, not a timer: no race may see a 409 unless its winner
// itself took longer than the server's wait.
func TestClient_IdempotencyRaceLoserGetsTheReplay(t *testing.T) {
	t.Parallel()
	ts := keyedServer(t, filepath.Join(t.TempDir(), "idgen.db"))
	log := &statusLog{}
	base := serve(t, log.wrap(ts.Config.Handler)).URL
	c, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	for round := range 20 {
		kctx := client.WithIdempotencyKey(context.Background(), fmt.Sprint("race-", round))
		start := make(chan struct{})
		var ids [2][]int64
		var errs [2]error
		var took [2]time.Duration
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				<-start
				t0 := time.Now()
				ids[i], errs[i] = c.NextN(kctx, "order", 3)
				took[i] = time.Since(t0)
			})
		}
		log.mu.Lock()
		log.all = nil
		log.mu.Unlock()
		close(start)
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || fmt.Sprint(ids[0]) != fmt.Sprint(ids[1]) {
			t.Fatalf("round %d: %v %v, %v %v; want the same IDs twice", round, ids[0], errs[0], ids[1], errs[1])
		}
		slowest = max(slowest, took[0], took[1])
		log.mu.Lock()
		var fresh, replays, conflicts int
		var winner time.Duration
		for _, a := range log.all {
			switch {
			case a.status == http.StatusConflict:
				conflicts++
			case a.status == http.StatusOK && a.replayed:
				replays++
			case a.status == http.StatusOK:
				fresh++
				winner = a.took
			}
		}
		log.mu.Unlock()
		if fresh != 1 || replays < 1 {
			t.Fatalf("round %d: %d first answers and %d replays; want 1 and at least 1", round, fresh, replays)
		}
		if conflicts > 0 && winner < idempotency.DefaultInFlightWait {
			t.Fatalf("round %d: %d answers of 409 though the first request took %v, under the server's wait of %v",
				round, conflicts, winner, idempotency.DefaultInFlightWait)
		}
	}
	t.Logf("slowest of 40 calls in 20 races: %v", slowest)
}

// In-flight answers are waits, not failures: they do not use up
// WithRetries, so a lock held for longer than the retries' backoff is
// waited out.
func TestClient_IdempotencyInFlightOutlastsTheRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 6 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":{"code":"idempotency_key_in_flight","message":"wait"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"tag":"t","id":"77"}`))
	}))
	defer ts.Close()
	c, _ := client.New(ts.URL, client.WithRetries(1), client.WithBackoff(time.Millisecond, 5*time.Millisecond))
	id, err := c.Next(client.WithIdempotencyKey(context.Background(), "k"), "t")
	if err != nil || id != 77 || calls.Load() != 7 {
		t.Fatalf("%d %v after %d calls; want 77 after 7 with 1 retry allowed", id, err, calls.Load())
	}
	// A context deadline still ends the wait.
	calls.Store(-1000)
	ctx, cancel := context.WithTimeout(client.WithIdempotencyKey(context.Background(), "k"), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Next(ctx, "t"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("in flight past the context's deadline: %v; want DeadlineExceeded", err)
	}
}
