package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/lock"
)

// idgen.v1.LockService: the rpcLock* methods are the one gRPC
// implementation, over lockService (locks.go), as rpcapi.go's are for
// IDService; lockConnect and grpcLockService below are the connect-go and
// grpc-go adapters.

func grantMsg(g lock.Grant) *idgenv1.LockGrant {
	return &idgenv1.LockGrant{Name: g.Name, Owner: g.Owner, Token: g.Token, ExpiresAt: timestamppb.New(g.Expires)}
}

// rpcDuration reads an optional Duration; a malformed one is bad.
func rpcDuration(d *durationpb.Duration, bad error) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, bad
	}
	return d.AsDuration(), nil
}

func (s *Server) rpcLockAcquire(ctx context.Context, h http.Header, name, owner string, ttlp, waitp *durationpb.Duration) (lock.Grant, error) {
	admin, err := s.admitLock(h, name)
	if err != nil {
		return lock.Grant{}, err
	}
	ttl, err := rpcDuration(ttlp, errLockTTL)
	if err != nil {
		return lock.Grant{}, err
	}
	wait, err := rpcDuration(waitp, errLockWait)
	if err != nil {
		return lock.Grant{}, err
	}
	return s.locks.acquire(ctx, admin, name, owner, ttl, wait)
}

func (s *Server) rpcAcquire(ctx context.Context, h http.Header, m *idgenv1.AcquireRequest) (*idgenv1.AcquireResponse, error) {
	g, err := s.rpcLockAcquire(ctx, h, m.GetName(), m.GetOwner(), m.GetTtl(), m.GetWait())
	if err != nil {
		return nil, err
	}
	return &idgenv1.AcquireResponse{Grant: grantMsg(g)}, nil
}

func (s *Server) rpcRenew(ctx context.Context, h http.Header, m *idgenv1.RenewRequest) (*idgenv1.RenewResponse, error) {
	if _, err := s.admitLock(h, m.GetName()); err != nil {
		return nil, err
	}
	ttl, err := rpcDuration(m.GetTtl(), errLockTTL)
	if err != nil {
		return nil, err
	}
	g, err := s.locks.renew(ctx, "renew", m.GetName(), m.GetOwner(), m.GetToken(), ttl)
	if err != nil {
		return nil, err
	}
	return &idgenv1.RenewResponse{Grant: grantMsg(g)}, nil
}

func (s *Server) rpcRelease(ctx context.Context, h http.Header, m *idgenv1.ReleaseRequest) (*idgenv1.ReleaseResponse, error) {
	if _, err := s.admitLock(h, m.GetName()); err != nil {
		return nil, err
	}
	if err := s.locks.release(ctx, m.GetName(), m.GetOwner(), m.GetToken()); err != nil {
		return nil, err
	}
	return &idgenv1.ReleaseResponse{}, nil
}

func (s *Server) rpcDescribe(ctx context.Context, h http.Header, m *idgenv1.DescribeRequest) (*idgenv1.DescribeResponse, error) {
	admin, err := s.admitLock(h, m.GetName())
	if err != nil {
		return nil, err
	}
	in, err := s.locks.describe(ctx, admin, m.GetName())
	if err != nil {
		return nil, err
	}
	out := &idgenv1.DescribeResponse{Name: in.Name}
	if in.Holder != nil {
		out.Holder, out.Since = grantMsg(*in.Holder), timestamppb.New(in.Since)
	}
	for _, w := range in.Waiters {
		out.Waiters = append(out.Waiters, &idgenv1.LockWaiter{Owner: w.Owner, Since: timestamppb.New(w.Since)})
	}
	return out, nil
}

// holdRenewEvery is the renewals per TTL of a Hold stream, as a Lease's
// watchdog renews (lock.Options.RenewEvery's default).
const holdRenewEvery = 3

// rpcHold is Hold over either transport: it acquires, sends the grant,
// and renews it until ctx ends (the client went away: the lock is
// released), the server drains (released too, and the stream ends
// UNAVAILABLE) or the grant is lost (the stream ends with lock_lost).
func (s *Server) rpcHold(ctx context.Context, h http.Header, m *idgenv1.HoldRequest, send func(*idgenv1.HoldResponse) error) error {
	g, err := s.rpcLockAcquire(ctx, h, m.GetName(), m.GetOwner(), m.GetTtl(), m.GetWait())
	if err != nil {
		return err
	}
	ttl := m.GetTtl().AsDuration()
	// The grant's lapse by this process's clock, counted from before the
	// request that made or renewed it, as a Lease counts.
	deadline := time.Now().Add(ttl)
	if err := send(&idgenv1.HoldResponse{Grant: grantMsg(g)}); err != nil {
		s.releaseHeld(ctx, g)
		return err
	}
	t := time.NewTimer(ttl / holdRenewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The client ended the stream: the normal end of a Hold,
			// which no one reads the status of, as a health Watch ends.
			s.releaseHeld(ctx, g)
			return nil
		case <-s.drained:
			// Shutting down: an open Hold would keep the graceful stop
			// waiting for its whole timeout, as a health Watch would.
			s.releaseHeld(ctx, g)
			return errHoldDrained
		case <-t.C:
		}
		if !time.Now().Before(deadline) {
			s.locks.obs.lockLost("hold")
			return fmt.Errorf("%w: no renewal succeeded within the TTL %v", lock.ErrLost, ttl)
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, deadline)
		ng, err := s.locks.renew(rctx, "hold", g.Name, g.Owner, g.Token, ttl)
		cancel()
		switch {
		case err == nil:
			g, deadline = ng, sent.Add(ttl)
			t.Reset(ttl / holdRenewEvery)
		case errors.Is(err, lock.ErrLost):
			return err
		case ctx.Err() != nil:
			s.releaseHeld(ctx, g)
			return nil
		default:
			// Retried within the TTL, as a Lease retries: the grant may
			// still stand.
			t.Reset(max(min(ttl/holdRenewEvery/5, time.Until(deadline)), time.Millisecond))
		}
	}
}

// releaseHeld frees a Hold stream's grant after its client went away,
// within holdReleaseTimeout; a release that fails leaves the grant to
// lapse after its TTL.
func (s *Server) releaseHeld(ctx context.Context, g lock.Grant) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), holdReleaseTimeout)
	defer cancel()
	_ = s.locks.b.Release(rctx, g) // lapses after its TTL otherwise
}

const holdReleaseTimeout = 5 * time.Second

var errHoldDrained = &apiError{http.StatusServiceUnavailable, "unavailable",
	"this server is shutting down: the lock was released; Hold again on another instance (a new grant, with a new token)"}

// lockConnect is idgen.v1.LockService on connect-go (connect.go).
type lockConnect struct{ s *Server }

var _ idgenv1connect.LockServiceHandler = lockConnect{}

func (r lockConnect) Acquire(ctx context.Context, req *connect.Request[idgenv1.AcquireRequest]) (*connect.Response[idgenv1.AcquireResponse], error) {
	return wrap(r.s.rpcAcquire(ctx, req.Header(), req.Msg))
}

func (r lockConnect) Renew(ctx context.Context, req *connect.Request[idgenv1.RenewRequest]) (*connect.Response[idgenv1.RenewResponse], error) {
	return wrap(r.s.rpcRenew(ctx, req.Header(), req.Msg))
}

func (r lockConnect) Release(ctx context.Context, req *connect.Request[idgenv1.ReleaseRequest]) (*connect.Response[idgenv1.ReleaseResponse], error) {
	return wrap(r.s.rpcRelease(ctx, req.Header(), req.Msg))
}

func (r lockConnect) Describe(ctx context.Context, req *connect.Request[idgenv1.DescribeRequest]) (*connect.Response[idgenv1.DescribeResponse], error) {
	return wrap(r.s.rpcDescribe(ctx, req.Header(), req.Msg))
}

func (r lockConnect) Hold(ctx context.Context, req *connect.Request[idgenv1.HoldRequest], st *connect.ServerStream[idgenv1.HoldResponse]) error {
	return r.s.rpcHold(ctx, req.Header(), req.Msg, st.Send)
}

// grpcLockService is idgen.v1.LockService on grpc-go (grpcnative.go).
type grpcLockService struct {
	idgenv1.UnimplementedLockServiceServer
	g grpcAdapter
}

func (l grpcLockService) Acquire(ctx context.Context, m *idgenv1.AcquireRequest) (*idgenv1.AcquireResponse, error) {
	return unaryCall(ctx, l.g, idgenv1.LockService_Acquire_FullMethodName, func(h http.Header) (*idgenv1.AcquireResponse, error) {
		return l.g.s.rpcAcquire(ctx, h, m)
	})
}

func (l grpcLockService) Renew(ctx context.Context, m *idgenv1.RenewRequest) (*idgenv1.RenewResponse, error) {
	return unaryCall(ctx, l.g, idgenv1.LockService_Renew_FullMethodName, func(h http.Header) (*idgenv1.RenewResponse, error) {
		return l.g.s.rpcRenew(ctx, h, m)
	})
}

func (l grpcLockService) Release(ctx context.Context, m *idgenv1.ReleaseRequest) (*idgenv1.ReleaseResponse, error) {
	return unaryCall(ctx, l.g, idgenv1.LockService_Release_FullMethodName, func(h http.Header) (*idgenv1.ReleaseResponse, error) {
		return l.g.s.rpcRelease(ctx, h, m)
	})
}

func (l grpcLockService) Describe(ctx context.Context, m *idgenv1.DescribeRequest) (*idgenv1.DescribeResponse, error) {
	return unaryCall(ctx, l.g, idgenv1.LockService_Describe_FullMethodName, func(h http.Header) (*idgenv1.DescribeResponse, error) {
		return l.g.s.rpcDescribe(ctx, h, m)
	})
}

// Hold runs under the stream interceptor (grpcAdapter.stream), which
// checks the client certificate, maps the error and records the call.
func (l grpcLockService) Hold(m *idgenv1.HoldRequest, st grpc.ServerStreamingServer[idgenv1.HoldResponse]) error {
	return l.g.s.rpcHold(st.Context(), grpcHeader(st.Context()), m, st.Send)
}
