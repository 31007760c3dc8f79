package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/lock"
)

// LockOptions configure Lock. The zero value of each field but Owner
// selects the default written next to it.
type LockOptions struct {
	// Owner names the holder: 1 to 200 bytes of printable UTF-8, unique
	// per process or task (a host name and PID, a job ID). Required. An
	// owner that locks a name it holds gets its lease back, with the
	// same token.
	Owner string
	// TTL is how long the grant lives unless renewed; the lease renews
	// it every TTL/3. Zero means 10s. The server bounds it
	// (--lock-min-ttl, --lock-max-ttl: 400 invalid_lock_ttl).
	TTL time.Duration
	// Wait is how long Lock waits for another owner's grant to end.
	// Zero does not wait: a held lock is a *lock.HeldError at once.
	// ctx's deadline ends the wait sooner.
	Wait time.Duration
}

// DefaultLockTTL is LockOptions.TTL's default.
const DefaultLockTTL = 10 * time.Second

// Lock takes the lock name on the server, over HTTP or gRPC as the
// client was made, and returns a lease with the semantics of package
// lock's: a watchdog renews it every TTL/3 while the holder works,
// Lost is closed and Context cancelled when a renewal finds it lost
// (lock.ErrLost) or renewals failed until the TTL ran out
// (lock.ErrExpired), and Release frees it. Pass Token to the resource the
// lock protects (lock.Guard).
//
// A lock held by another owner after Wait is a *lock.HeldError
// (errors.Is(err, lock.ErrHeld)); its Holder names the owner only for a
// client with the server's admin token.
func (c *Client) Lock(ctx context.Context, name string, o LockOptions) (*lock.Lease, error) {
	if o.TTL == 0 {
		o.TTL = DefaultLockTTL
	}
	if o.Wait < 0 {
		return nil, fmt.Errorf("%w: LockOptions.Wait %v is negative", ErrBadRequest, o.Wait)
	}
	if o.Wait == 0 {
		return c.locks.TryAcquire(ctx, name, o.Owner, o.TTL)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Wait)
	defer cancel()
	return c.locks.Acquire(ctx, name, o.Owner, o.TTL)
}

// newLocker is the Locker of c's Leases. Its TTL bounds are wide: the
// server's are the ones that count, and its refusal says what they are.
func newLocker(c *Client) *lock.Locker {
	l, err := lock.New(lockBackend{c}, lock.Options{MinTTL: 10 * time.Millisecond, MaxTTL: 24 * time.Hour})
	if err != nil {
		panic(err) // constant options
	}
	return l
}

// lockBackend is the server's lock API as a lock.Backend, so that the
// lock package's Locker and Lease, watchdog included, run over it
// unchanged.
type lockBackend struct{ c *Client }

var _ lock.Backend = lockBackend{}

// maxLockWaitPerCall bounds the wait one acquire call asks the server
// for; the server cuts it further to its --lock-max-wait. A longer wait
// is several calls.
const maxLockWaitPerCall = 10 * time.Second

// waitPerCall is the wait to ask one call for: what is left of ctx's,
// within the HTTP client's timeout.
func (b lockBackend) waitPerCall(ctx context.Context) time.Duration {
	w := maxLockWaitPerCall
	if t := b.c.http.Timeout; t > 0 {
		w = min(w, t/2)
	}
	if d, ok := ctx.Deadline(); ok {
		w = min(w, time.Until(d))
	}
	return max(w, 0)
}

// Acquire asks the server for the lock, again while wait and ctx allow:
// the server ends each wait at its own maximum.
func (b lockBackend) Acquire(ctx context.Context, name, owner string, ttl time.Duration, wait bool) (lock.Grant, error) {
	for {
		var w time.Duration
		if wait {
			w = b.waitPerCall(ctx)
		}
		g, err := b.acquireOnce(ctx, name, owner, ttl, w)
		var he *lock.HeldError
		if !wait || !errors.As(err, &he) || ctx.Err() != nil || w == 0 {
			return g, err
		}
	}
}

func (b lockBackend) acquireOnce(ctx context.Context, name, owner string, ttl, wait time.Duration) (lock.Grant, error) {
	c := b.c
	var g lock.Grant
	var err error
	if c.lockRPC != nil {
		req := connect.NewRequest(&idgenv1.AcquireRequest{Name: name, Owner: owner, Ttl: durationpb.New(ttl), Wait: durationpb.New(wait)})
		c.authorize(req.Header())
		err = c.retry(ctx, func() (time.Duration, error) {
			resp, err := c.lockRPC.Acquire(ctx, req)
			if err != nil {
				return c.rpcFailure(ctx, err)
			}
			g = grantOf(resp.Msg.GetGrant())
			return -1, nil
		})
	} else {
		body, _ := json.Marshal(map[string]string{"owner": owner, "ttl": ttl.String(), "wait": wait.String()})
		var out grantJSON
		if err = c.doBody(ctx, http.MethodPost, lockPath(name), nil, nil, body, &out); err == nil {
			g, err = out.grant()
		}
	}
	return g, heldError(name, err)
}

// heldError turns lock_held into the *lock.HeldError the lock package
// returns; its Holder has the owner and expiry when the server named
// them (the admin scope).
func heldError(name string, err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Code != "lock_held" {
		return err
	}
	he := &lock.HeldError{Holder: lock.Grant{Name: name, Owner: e.Holder.Owner}}
	he.Holder.Expires, _ = time.Parse(time.RFC3339Nano, e.Holder.ExpiresAt)
	return he
}

func (b lockBackend) Renew(ctx context.Context, g lock.Grant, ttl time.Duration) (lock.Grant, error) {
	c := b.c
	var out lock.Grant
	if c.lockRPC != nil {
		req := connect.NewRequest(&idgenv1.RenewRequest{Name: g.Name, Owner: g.Owner, Token: g.Token, Ttl: durationpb.New(ttl)})
		c.authorize(req.Header())
		err := c.retry(ctx, func() (time.Duration, error) {
			resp, err := c.lockRPC.Renew(ctx, req)
			if err != nil {
				return c.rpcFailure(ctx, err)
			}
			out = grantOf(resp.Msg.GetGrant())
			return -1, nil
		})
		return out, err
	}
	body, _ := json.Marshal(map[string]string{"owner": g.Owner, "token": strconv.FormatInt(g.Token, 10), "ttl": ttl.String()})
	var j grantJSON
	if err := c.doBody(ctx, http.MethodPost, lockPath(g.Name)+"/renew", nil, nil, body, &j); err != nil {
		return lock.Grant{}, err
	}
	return j.grant()
}

func (b lockBackend) Release(ctx context.Context, g lock.Grant) error {
	c := b.c
	if c.lockRPC != nil {
		req := connect.NewRequest(&idgenv1.ReleaseRequest{Name: g.Name, Owner: g.Owner, Token: g.Token})
		c.authorize(req.Header())
		return c.retry(ctx, func() (time.Duration, error) {
			if _, err := c.lockRPC.Release(ctx, req); err != nil {
				return c.rpcFailure(ctx, err)
			}
			return -1, nil
		})
	}
	q := url.Values{"owner": {g.Owner}, "token": {strconv.FormatInt(g.Token, 10)}}
	return c.doBody(ctx, http.MethodDelete, lockPath(g.Name), q, nil, nil, nil)
}

func (b lockBackend) Describe(ctx context.Context, name string) (lock.Info, error) {
	c := b.c
	if c.lockRPC != nil {
		req := connect.NewRequest(&idgenv1.DescribeRequest{Name: name})
		c.authorize(req.Header())
		var in lock.Info
		err := c.retry(ctx, func() (time.Duration, error) {
			resp, err := c.lockRPC.Describe(ctx, req)
			if err != nil {
				return c.rpcFailure(ctx, err)
			}
			m := resp.Msg
			in = lock.Info{Name: m.GetName(), Since: m.GetSince().AsTime()}
			if m.GetHolder() != nil {
				g := grantOf(m.GetHolder())
				in.Holder = &g
			}
			for _, w := range m.GetWaiters() {
				in.Waiters = append(in.Waiters, lock.Waiter{Owner: w.GetOwner(), Since: w.GetSince().AsTime()})
			}
			return -1, nil
		})
		return in, err
	}
	var out struct {
		Name    string
		Holder  *grantJSON
		Since   string
		Waiters []struct{ Owner, Since string }
	}
	if err := c.do(ctx, http.MethodGet, lockPath(name), nil, nil, &out); err != nil {
		return lock.Info{}, err
	}
	in := lock.Info{Name: out.Name}
	if out.Holder != nil {
		g, err := out.Holder.grant()
		if err != nil {
			return lock.Info{}, err
		}
		in.Holder = &g
		in.Since, _ = time.Parse(time.RFC3339Nano, out.Since)
	}
	for _, w := range out.Waiters {
		since, _ := time.Parse(time.RFC3339Nano, w.Since)
		in.Waiters = append(in.Waiters, lock.Waiter{Owner: w.Owner, Since: since})
	}
	return in, nil
}

// DescribeLock returns who holds the lock name and who waits for it, in
// arrival order. Owners are named only to a client with the server's
// admin token.
func (c *Client) DescribeLock(ctx context.Context, name string) (lock.Info, error) {
	return lockBackend{c}.Describe(ctx, name)
}

// lockPath is the HTTP path of the lock name. A name with a slash cannot
// be addressed over HTTP (the router splits paths on decoded slashes);
// use gRPC for such names.
func lockPath(name string) string { return "/locks/" + url.PathEscape(name) }

// grantJSON is a grant as the HTTP API writes it.
type grantJSON struct {
	Name      string `json:"name"`
	Owner     string `json:"owner"`
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

func (j grantJSON) grant() (lock.Grant, error) {
	tok, err := strconv.ParseInt(j.Token, 10, 64)
	if err != nil {
		return lock.Grant{}, fmt.Errorf("client: server sent a bad lock token %q", j.Token)
	}
	exp, err := time.Parse(time.RFC3339Nano, j.ExpiresAt)
	if err != nil {
		return lock.Grant{}, fmt.Errorf("client: server sent a bad lock expiry %q", j.ExpiresAt)
	}
	return lock.Grant{Name: j.Name, Owner: j.Owner, Token: tok, Expires: exp}, nil
}

func grantOf(m *idgenv1.LockGrant) lock.Grant {
	return lock.Grant{Name: m.GetName(), Owner: m.GetOwner(), Token: m.GetToken(), Expires: m.GetExpiresAt().AsTime()}
}

// ReleaseLock frees the lock g names if g is still its grant, as
// Lease.Release does, for a grant kept outside a Lease (a job that stored
// its token). Another owner's grant or an older token is an error
// matching lock.ErrNotHeld, and the lock is left as it was.
func (c *Client) ReleaseLock(ctx context.Context, g lock.Grant) error {
	return lockBackend{c}.Release(ctx, g)
}
