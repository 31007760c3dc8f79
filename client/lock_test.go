package client_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/idgentest"
	"github.com/idgen/idgen/lock"
)

// lockTransports are the ways a client reaches the lock API of srv.
func lockTransports(srv *idgentest.Server) []struct {
	name string
	opts []client.Option
} {
	return []struct {
		name string
		opts []client.Option
	}{
		{"http", nil},
		{"grpc on the main port", []client.Option{client.WithGRPC()}},
		{"grpc-go port", []client.Option{client.WithGRPCAddr(srv.GRPCAddr)}},
	}
}

// The sequence with the Go client, over each transport.
func TestLock_HandOverAndStaleRelease(t *testing.T) {
	t.Parallel()
	srv := idgentest.NewServer(t, &idgentest.Options{AdminToken: "admin-token-0123456789"})
	for _, tr := range lockTransports(srv) {
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			c := srv.Client(tr.opts...)
			name := "order:" + tr.name
			a, err := c.Lock(ctx, name, client.LockOptions{Owner: "a"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Lock(ctx, name, client.LockOptions{Owner: "b"})
			var he *lock.HeldError
			if !errors.Is(err, lock.ErrHeld) || !errors.As(err, &he) || he.Holder.Owner != "" {
				t.Fatalf("b without a wait: %v; want a *lock.HeldError naming no owner", err)
			}
			admin := srv.Client(append(tr.opts, client.WithToken(srv.AdminToken()))...)
			if _, err := admin.Lock(ctx, name, client.LockOptions{Owner: "b"}); !errors.As(err, &he) || he.Holder.Owner != "a" {
				t.Fatalf("b as admin: %v; want a *lock.HeldError naming a", err)
			}
			old := a.Grant()
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			b, err := c.Lock(ctx, name, client.LockOptions{Owner: "b"})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = b.Release(ctx) }()
			if b.Token() <= old.Token {
				t.Fatalf("b's token %d, not above a's %d", b.Token(), old.Token)
			}
			if err := c.ReleaseLock(ctx, old); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("release with a's old token: %v; want lock.ErrNotHeld", err)
			}
			in, err := admin.DescribeLock(ctx, name)
			if err != nil || in.Holder == nil || in.Holder.Owner != "b" || in.Holder.Token != b.Token() {
				t.Fatalf("describe: %+v, %v; want b holding token %d", in, err, b.Token())
			}
			if err := b.Err(); err != nil {
				t.Fatalf("b's lease after the stale release: %v", err)
			}
		})
	}
}

// switchable fails every request while down is set, as a network
// partition between the holder and the server would.
type switchable struct {
	rt   http.RoundTripper
	down atomic.Bool
}

func (s *switchable) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.down.Load() {
		return nil, errors.New("test: partitioned")
	}
	return s.rt.RoundTrip(r)
}

// A holder that can no longer renew loses its lease once its TTL has
// run out (Lost, lock.ErrExpired), and a waiter gets the lock once the
// server's grant lapses, with a greater token.
func TestLock_HolderThatStopsRenewingLosesIt(t *testing.T) {
	t.Parallel()
	srv := idgentest.NewServer(t, &idgentest.Options{LockMinTTL: 50 * time.Millisecond})
	ctx := context.Background()
	net := &switchable{rt: http.DefaultTransport}
	holder := srv.Client(client.WithHTTPClient(&http.Client{Transport: net, Timeout: 5 * time.Second}), client.WithRetries(0))
	const ttl = 300 * time.Millisecond
	le, err := holder.Lock(ctx, "job", client.LockOptions{Owner: "a", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	net.down.Store(true)
	waiter := srv.Client()
	b, err := waiter.Lock(ctx, "job", client.LockOptions{Owner: "b", TTL: 10 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("waiter: %v", err)
	}
	defer func() { _ = b.Release(ctx) }()
	select {
	case <-le.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the partitioned holder's lease never reported its loss")
	}
	// The bound itself (the TTL plus one renewal interval) is checked in
	// fake time by lock.TestLease_LostWithinOneRenewalOfItsTTL; here, on
	// a real server and a shared machine, it is reported.
	t.Logf("Lost fired %v after the partition (TTL %v, renewal every %v)", time.Since(cut), ttl, ttl/3)
	if !errors.Is(le.Err(), lock.ErrExpired) || !errors.Is(context.Cause(le.Context()), lock.ErrExpired) {
		t.Fatalf("lease error %v, context cause %v; want lock.ErrExpired", le.Err(), context.Cause(le.Context()))
	}
	if b.Token() <= le.Token() {
		t.Fatalf("waiter's token %d, not above the lost holder's %d", b.Token(), le.Token())
	}
}

// A renewal that finds the grant taken over closes Lost with lock.ErrLost.
func TestLock_TakenOverIsLost(t *testing.T) {
	t.Parallel()
	srv := idgentest.NewServer(t, &idgentest.Options{LockMinTTL: 50 * time.Millisecond})
	for _, tr := range lockTransports(srv) {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := srv.Client(tr.opts...)
			name := "taken:" + tr.name
			le, err := c.Lock(ctx, name, client.LockOptions{Owner: "a", TTL: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			// As if the store had dropped the grant: freed behind the
			// lease's back, and taken by b.
			if err := c.ReleaseLock(ctx, le.Grant()); err != nil {
				t.Fatal(err)
			}
			b, err := c.Lock(ctx, name, client.LockOptions{Owner: "b"})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = b.Release(ctx) }()
			select {
			case <-le.Lost():
			case <-time.After(5 * time.Second):
				t.Fatal("Lost not closed after the grant was taken over")
			}
			if !errors.Is(le.Err(), lock.ErrLost) {
				t.Fatalf("lease error %v; want lock.ErrLost", le.Err())
			}
		})
	}
}

// A bad request is refused with the lock package's sentinels.
func TestLock_BadRequests(t *testing.T) {
	t.Parallel()
	srv := idgentest.NewServer(t, nil)
	ctx := context.Background()
	for _, tr := range lockTransports(srv) {
		c := srv.Client(tr.opts...)
		for _, tc := range []struct {
			name string
			opts client.LockOptions
			want error
		}{
			{"", client.LockOptions{Owner: "a"}, lock.ErrInvalidName},
			{"x", client.LockOptions{}, lock.ErrInvalidOwner},
			{"x", client.LockOptions{Owner: "a", TTL: 20 * time.Millisecond}, lock.ErrInvalidTTL},
			{"x", client.LockOptions{Owner: "a", TTL: time.Hour}, lock.ErrInvalidTTL},
			{"x", client.LockOptions{Owner: "a", Wait: -time.Second}, client.ErrBadRequest},
		} {
			if _, err := c.Lock(ctx, tc.name, tc.opts); !errors.Is(err, tc.want) {
				t.Errorf("%s: Lock(%q, %+v) = %v; want %v", tr.name, tc.name, tc.opts, err, tc.want)
			}
		}
	}
}
