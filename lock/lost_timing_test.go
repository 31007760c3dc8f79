package lock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idgen/idgen/lock"
)

// partitioned is a Backend that grants once and then cannot be reached:
// every renewal fails at once (refused) or hangs until its context ends
// (a dropped network), as a holder cut off from its store sees it.
type partitioned struct {
	hang bool
}

func (p partitioned) Acquire(_ context.Context, name, owner string, ttl time.Duration, _ bool) (lock.Grant, error) {
	return lock.Grant{Name: name, Owner: owner, Token: 1, Expires: time.Now().Add(ttl)}, nil
}

func (p partitioned) Renew(ctx context.Context, _ lock.Grant, _ time.Duration) (lock.Grant, error) {
	if p.hang {
		<-ctx.Done()
		return lock.Grant{}, ctx.Err()
	}
	return lock.Grant{}, errors.New("partitioned: connection refused")
}

func (p partitioned) Release(context.Context, lock.Grant) error { return nil }

func (p partitioned) Describe(_ context.Context, name string) (lock.Info, error) {
	return lock.Info{Name: name}, nil
}

// A holder that can no longer renew reports the loss within one renewal
// interval of its TTL running out, never before it (the grant may still
// stand until then), whether its renewals are refused or hang. Time is
// the bubble's, so the bound is exact rather than a wall-clock guess;
// client.TestLock_HolderThatStopsRenewingLosesIt shows the same lease
// lost over a real server.
func TestLease_LostWithinOneRenewalOfItsTTL(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	for _, tc := range []struct {
		name string
		hang bool
	}{
		{"refused", false},
		{"hanging", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				l, err := lock.New(partitioned{hang: tc.hang}, lock.Options{})
				if err != nil {
					t.Fatal(err)
				}
				sent := time.Now()
				le, err := l.TryAcquire(context.Background(), "job", "a", ttl)
				if err != nil {
					t.Fatal(err)
				}
				<-le.Lost()
				after := time.Since(sent)
				if every := ttl / 3; after < ttl || after > ttl+every {
					t.Errorf("lost %v after the grant; want within [%v, %v]", after, ttl, ttl+every)
				}
				if !errors.Is(le.Err(), lock.ErrExpired) || !errors.Is(context.Cause(le.Context()), lock.ErrExpired) {
					t.Fatalf("Err %v, context cause %v; want lock.ErrExpired", le.Err(), context.Cause(le.Context()))
				}
				t.Logf("lost %v after the grant (TTL %v, renewal every %v)", after, ttl, ttl/3)
			})
		})
	}
}
