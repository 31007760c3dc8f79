package sqlstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// The store's one retry loop: every transaction that a deadlock, a lock
// wait timeout or a serialization failure may abort (reservations,
// imports, claims, fences, idempotency keys) runs through retry.

// retries is how often a transaction is retried after a deadlock or
// serialization failure (Dialect.IsRetryable). On MariaDB, claims that
// create rows at the same time deadlock now and then (INSERT IGNORE of
// the same keys), and on Galera reservations from two nodes abort each
// other. Retries wait backoff(n), 0.6 s on average over all 20.
const retries = 20

// RetryObserver is told of each retry after a retryable error, with the
// operation: "reserve", "raise", "bump", "create", "import", "claim",
// "renew", "fence" or "idempotency". It must not block.
type RetryObserver func(op string)

// retryHook holds an optional RetryObserver, set once the metrics exist
// and read by every call.
type retryHook struct{ f atomic.Pointer[RetryObserver] }

// ObserveRetries makes f count this store's retries.
func (h *retryHook) ObserveRetries(f RetryObserver) { h.f.Store(&f) }

func (h *retryHook) retried(op string) {
	if f := h.f.Load(); f != nil && *f != nil {
		(*f)(op)
	}
}

// retry runs fn until it succeeds, fails with an error the dialect does
// not call retryable, or has been retried retries times, waiting
// backoff(n) before the nth retry.
func retry(ctx context.Context, d Dialect, h *retryHook, op string, fn func() error) error {
	for failures := 0; ; {
		err := fn()
		if err == nil || d.IsRetryable == nil || !d.IsRetryable(err) {
			return err
		}
		if failures++; failures > retries {
			return fmt.Errorf("%w (still after %d retries)", err, retries)
		}
		h.retried(op)
		if serr := sleep(ctx, backoff(failures)); serr != nil {
			return err
		}
	}
}

// backoff is the wait before the nth retry: random, so that transactions
// that collided do not collide again, up to a bound that doubles from
// 2 ms to 64 ms. On a three-node Galera cluster whose nodes all reserve
// one row a hundred times a second, 10 retries with waits growing
// linearly from 2 ms ran out for one reservation in thirty.
func backoff(n int) time.Duration {
	bound := retryBase << min(n-1, 5)
	return rand.N(bound) + 1
}

// retryBase is the bound of the first retry's wait; see backoff.
const retryBase = 2 * time.Millisecond

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
