package idempotency

import (
	"context"
	"errors"
	"time"
)

// ErrHoldLost is the cause (context.Cause) of the end of a Do handler's
// context when its request lost its hold on the key: the store did not
// renew it before it expired, or the row was taken over or removed. A
// retry may run the handler from then on, so the handler should stop.
var ErrHoldLost = errors.New("idempotency: the request lost its hold on the key")

// completeTimeout bounds the recording of an answer, which runs even
// when the caller's context is done (see Do).
const completeTimeout = 5 * time.Second

// Do runs a keyed request: fn runs at most once per key, and a repeat
// gets its recorded answer, with replayed true. It is the whole
// protocol of Begin, Complete and Abandon, in the way of a database's
// Update(fn):
//
//   - a repeat, a refusal or a store failure returns before fn runs:
//     the recorded answer, or ErrKeyReused, an *InFlightError, a
//     *KeyLimitError or ErrStore;
//   - fn's answer is recorded (even if ctx is done by then: the work is
//     done, and a retry should get it rather than wait), and returned;
//     if another request took the key over meanwhile, the answer on
//     record is returned instead, replayed, or the error a repeat gets;
//   - an error of fn frees the key, so that a retry runs fn again, and
//     is returned as it is; a panic of fn frees the key and goes on.
//
// While fn runs, its hold on the key is renewed every third of
// Config.LockTimeout, so that no retry takes a slow fn's key over; fn's
// context ends, with cause ErrHoldLost, if the hold is lost all the
// same, and at the key's expiry, when any request may take it.
func (k *Keeper) Do(ctx context.Context, r Request, fn func(ctx context.Context) (Answer, error)) (ans Answer, replayed bool, err error) {
	t, replay, err := k.Begin(ctx, r)
	switch {
	case err != nil:
		return Answer{}, false, err
	case replay != nil:
		return *replay, true, nil
	}
	hctx, release := t.keep(ctx)
	ran := false
	defer func() {
		if !ran { // fn panicked
			release()
			t.Abandon(ctx)
		}
	}()
	a, err := fn(hctx)
	ran = true
	release()
	if err != nil {
		t.Abandon(ctx)
		return Answer{}, false, err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completeTimeout)
	defer cancel()
	return t.Complete(cctx, a)
}

// keep renews t's hold until release, which waits for the renewals to
// end so that none races Complete or Abandon. The context it returns
// ends with cause ErrHoldLost when the hold is lost.
func (t *Ticket) keep(ctx context.Context) (held context.Context, release func()) {
	held, lose := context.WithCancelCause(ctx)
	life, end := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if t.renewUntilLost(life) {
			lose(ErrHoldLost)
		}
	}()
	return held, func() {
		end()
		<-done
		lose(context.Canceled)
	}
}

// renewUntilLost renews t's hold every third of LockTimeout until life
// ends (false) or the hold is lost (true): a renewal finds the row no
// longer t's, or none succeeds before the lock or the key expires.
func (t *Ticket) renewUntilLost(life context.Context) bool {
	k, r := t.k, &t.rec
	every := k.cfg.LockTimeout / 3
	next := k.cfg.Now().Add(every)
	for {
		now := k.cfg.Now()
		lost := r.LockedUntil
		if r.ExpiresAt.Before(lost) {
			lost = r.ExpiresAt
		}
		if !now.Before(lost) {
			return true
		}
		timer := time.NewTimer(min(next.Sub(now), lost.Sub(now)))
		select {
		case <-life.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
		now = k.cfg.Now()
		if now.Before(next) {
			continue // the lock's end came first: lost, looked at above
		}
		next = now.Add(every)
		until := now.Add(k.cfg.LockTimeout)
		rctx, cancel := context.WithTimeout(life, lost.Sub(now))
		ok, err := k.st.Renew(rctx, r.Scope, r.Key, r.Owner, until)
		cancel()
		switch {
		case life.Err() != nil:
			return false
		case err != nil:
			// The lock still runs: try again at the next turn, and give
			// up when it ends.
			k.cfg.Logger.Warn("idempotency: could not renew a key's hold; the handler is stopped if it expires",
				"lock_timeout", k.cfg.LockTimeout, "err", err)
		case !ok:
			return true
		default:
			r.LockedUntil = until
		}
	}
}
