package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/idgentest"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/store/sqlite"
)

// holdStream is a Hold call as either transport's client makes it.
type holdStream interface {
	recv() (*idgenv1.HoldResponse, error)
}

type connectHold struct {
	s *connect.ServerStreamForClient[idgenv1.HoldResponse]
}

func (c connectHold) recv() (*idgenv1.HoldResponse, error) {
	if c.s.Receive() {
		return c.s.Msg(), nil
	}
	if err := c.s.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("stream ended without an error")
}

type grpcHold struct {
	s grpc.ServerStreamingClient[idgenv1.HoldResponse]
}

func (g grpcHold) recv() (*idgenv1.HoldResponse, error) { return g.s.Recv() }

// reason is the idgen code of a gRPC error from either client.
func reason(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		for _, d := range ce.Details() {
			if v, _ := d.Value(); v != nil {
				if ei, ok := v.(*errdetails.ErrorInfo); ok {
					return ei.GetReason()
				}
			}
		}
	}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if ei, ok := d.(*errdetails.ErrorInfo); ok {
				return ei.GetReason()
			}
		}
	}
	return ""
}

// Hold on both gRPC ports: it grants, keeps the lock past its TTL while
// the stream is open, releases it when the client cancels, and ends with
// lock_lost when the grant is taken from it.
func TestLocks_Hold(t *testing.T) {
	t.Parallel()
	srv := idgentest.NewServer(t, &idgentest.Options{LockMinTTL: 50 * time.Millisecond})
	// Unary calls go over connect on the main port; the streams over
	// each transport.
	h2c := &http.Client{Transport: &http.Transport{Protocols: func() *http.Protocols {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		return p
	}()}}
	locks := idgenv1connect.NewLockServiceClient(h2c, srv.URL, connect.WithGRPC())
	conn, err := grpc.NewClient(srv.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	native := idgenv1.NewLockServiceClient(conn)
	// Long enough for renewals to get through on a loaded machine under
	// -race, beside a waiter that polls SQLite.
	const ttl = time.Second
	// The transports' streams, each on a lock of its own, run side by
	// side: each waits out a TTL and a half, and the metrics below wait
	// for both.
	t.Run("transports", func(t *testing.T) {
		testLocksHold(t, locks, native, ttl)
	})
	// Each transport's lost stream is counted once.
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if want := `idgen_lock_losses_total{via="hold"} 2` + "\n"; !strings.Contains(string(b), want) {
		t.Errorf("/metrics lacks %q:\n%s", want, grepLines(string(b), "idgen_lock_"))
	}
}

// testLocksHold runs TestLocks_Hold's stream checks over each transport,
// as parallel subtests.
func testLocksHold(t *testing.T, locks idgenv1connect.LockServiceClient, native idgenv1.LockServiceClient, ttl time.Duration) {
	for _, tr := range []struct {
		name string
		hold func(ctx context.Context, m *idgenv1.HoldRequest) (holdStream, error)
	}{
		{"connect-go", func(ctx context.Context, m *idgenv1.HoldRequest) (holdStream, error) {
			s, err := locks.Hold(ctx, connect.NewRequest(m))
			return connectHold{s}, err
		}},
		{"grpc-go", func(ctx context.Context, m *idgenv1.HoldRequest) (holdStream, error) {
			s, err := native.Hold(ctx, m)
			return grpcHold{s}, err
		}},
	} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			name := "hold:" + tr.name
			acquire := func(owner string, wait time.Duration) (*idgenv1.LockGrant, error) {
				resp, err := locks.Acquire(t.Context(), connect.NewRequest(&idgenv1.AcquireRequest{Name: name, Owner: owner,
					Ttl: durationpb.New(time.Second), Wait: durationpb.New(wait)}))
				if err != nil {
					return nil, err
				}
				return resp.Msg.GetGrant(), nil
			}
			ctx, cancel := context.WithCancel(t.Context())
			st, err := tr.hold(ctx, &idgenv1.HoldRequest{Name: name, Owner: "a", Ttl: durationpb.New(ttl)})
			if err != nil {
				t.Fatal(err)
			}
			first, err := st.recv()
			if err != nil || first.GetGrant().GetOwner() != "a" {
				t.Fatalf("first message: %v, %v", first, err)
			}
			// b waits past a's TTL and is still refused: the stream renewed.
			if g, err := acquire("b", ttl+ttl/2); reason(err) != "lock_held" {
				_, serr := st.recv()
				t.Fatalf("b while a's stream is open: %v, %v; want lock_held; a's stream: %v", g, err, serr)
			}
			// The client goes away: the lock is released, and b gets it
			// without waiting for a TTL to lapse.
			cancel()
			b, err := acquire("b", 5*time.Second)
			if err != nil || b.GetToken() <= first.GetGrant().GetToken() {
				t.Fatalf("b after a's stream ended: %v, %v", b, err)
			}

			// A stream whose grant is taken from it ends with lock_lost.
			if _, err := locks.Release(t.Context(), connect.NewRequest(&idgenv1.ReleaseRequest{Name: name, Owner: "b", Token: b.GetToken()})); err != nil {
				t.Fatal(err)
			}
			st, err = tr.hold(t.Context(), &idgenv1.HoldRequest{Name: name, Owner: "c", Ttl: durationpb.New(ttl)})
			if err != nil {
				t.Fatal(err)
			}
			c, err := st.recv()
			if err != nil {
				t.Fatalf("c's grant: %v", err)
			}
			if _, err := locks.Release(t.Context(), connect.NewRequest(&idgenv1.ReleaseRequest{Name: name, Owner: "c", Token: c.GetGrant().GetToken()})); err != nil {
				t.Fatal(err)
			}
			if _, err := acquire("d", 0); err != nil {
				t.Fatal(err)
			}
			if _, err := st.recv(); reason(err) != "lock_lost" {
				t.Fatalf("c's stream after d took the lock: %v; want lock_lost", err)
			}
		})
	}
}

// A server that drains ends its Hold streams, UNAVAILABLE, and releases
// their locks, so that a graceful stop does not wait for them.
func TestLocks_HoldEndsOnDrain(t *testing.T) {
	t.Parallel()
	alloc := idgentest.NewAllocator(t)
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "locks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Segment: alloc, Locks: server.LockConfig{Backend: st.Locks()}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s)
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	defer ts.Close()
	h2c := &http.Client{Transport: &http.Transport{Protocols: ts.Config.Protocols}}
	locks := idgenv1connect.NewLockServiceClient(h2c, ts.URL, connect.WithGRPC())
	stream, err := locks.Hold(t.Context(), connect.NewRequest(&idgenv1.HoldRequest{Name: "drain", Owner: "a", Ttl: durationpb.New(time.Minute)}))
	if err != nil {
		t.Fatal(err)
	}
	st0 := connectHold{stream}
	if _, err := st0.recv(); err != nil {
		t.Fatal(err)
	}
	s.Drain()
	if _, err := st0.recv(); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("Hold after Drain: %v; want UNAVAILABLE", err)
	}
	// Released, not left to lapse after its minute.
	if _, err := locks.Acquire(t.Context(), connect.NewRequest(&idgenv1.AcquireRequest{Name: "drain", Owner: "b", Ttl: durationpb.New(time.Second)})); err != nil {
		t.Fatalf("b after the drain: %v", err)
	}
}
