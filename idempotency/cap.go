package idempotency

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// fullRecount is how long a scope found full is refused before its
// live keys are counted again: it bounds the COUNTs a caller at its cap
// can cause to one a second, and it is the Retry-After of the refusal.
const fullRecount = time.Second

// KeyLimitError is ErrKeyLimit with the wait before the scope is
// counted again, when keys that expired or were abandoned meanwhile
// make room.
type KeyLimitError struct {
	Max  int64
	Wait time.Duration
}

func (e *KeyLimitError) Error() string {
	return fmt.Sprintf("%v: %d live keys; retry in %v", ErrKeyLimit, e.Max, e.Wait)
}

// Is makes errors.Is(err, ErrKeyLimit) match.
func (e *KeyLimitError) Is(target error) bool { return target == ErrKeyLimit }

// RetryAfter is the wait a Retry-After header should announce.
func (e *KeyLimitError) RetryAfter() time.Duration { return max(e.Wait, time.Second) }

// scopeCount is the cap's estimate of one scope's live keys: base, as
// counted last, plus added, this process's new keys since. Its fields
// but added are guarded by Keeper.mu; the count itself runs without it.
type scopeCount struct {
	base  int64
	added atomic.Int64
	// checkAt is the estimate at which the scope is counted again:
	// half-way to the cap from the last count, so that keys other
	// instances added show before the cap rather than a sweep later.
	checkAt int64
	// fullUntil is when a scope found full may be counted again.
	fullUntil time.Time
	// counting is closed when the count under way ends; nil if none.
	counting chan struct{}
}

// newScopeCount is the estimate after a count of n live keys.
func (k *Keeper) newScopeCount(n int64) *scopeCount {
	return &scopeCount{base: n, checkAt: n + max(1, (k.cfg.MaxKeys-n)/2)}
}

// underCap returns nil if scope may add a key at now, a *KeyLimitError
// if it holds MaxKeys live keys as counted just now, or ErrStore if the
// count failed. One count of a scope runs at a time; the others wait
// for it.
func (k *Keeper) underCap(ctx context.Context, scope string, now time.Time) error {
	if k.cfg.MaxKeys < 0 {
		return nil
	}
	for {
		k.mu.Lock()
		sc := k.scopes[scope]
		if sc == nil {
			sc = k.newScopeCount(0)
			k.scopes[scope] = sc
		}
		est := sc.base + sc.added.Load()
		switch {
		case est < sc.checkAt && est < k.cfg.MaxKeys:
			k.mu.Unlock()
			return nil
		case now.Before(sc.fullUntil):
			wait := sc.fullUntil.Sub(now)
			k.mu.Unlock()
			return &KeyLimitError{Max: k.cfg.MaxKeys, Wait: wait}
		case sc.counting != nil:
			ch := sc.counting
			k.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return fmt.Errorf("%w: %w", ErrStore, ctx.Err())
			}
		}
		ch := make(chan struct{})
		sc.counting = ch
		before := sc.added.Load()
		k.mu.Unlock()

		n, err := k.st.CountScope(ctx, scope, now)

		k.mu.Lock()
		sc.counting = nil
		close(ch)
		if err != nil {
			k.mu.Unlock()
			return fmt.Errorf("%w: counting the caller's keys: %w", ErrStore, err)
		}
		// Keys added while the count ran may be in n and in added both:
		// the cap errs on the safe side until the next count.
		sc.base = n
		sc.added.Add(-before)
		sc.checkAt = n + max(1, (k.cfg.MaxKeys-n)/2)
		if n >= k.cfg.MaxKeys {
			sc.fullUntil = now.Add(fullRecount)
		}
		k.mu.Unlock()
		if n >= k.cfg.MaxKeys {
			return &KeyLimitError{Max: k.cfg.MaxKeys, Wait: fullRecount}
		}
		return nil
	}
}

// addedTo returns the counter of scope's new keys.
func (k *Keeper) addedTo(scope string) *atomic.Int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	sc := k.scopes[scope]
	if sc == nil {
		sc = k.newScopeCount(0)
		k.scopes[scope] = sc
	}
	return &sc.added
}

// recounted replaces the estimates with a sweep's counts. A scope with
// no live keys drops out, so that the map holds live callers only.
// Keys added while Count ran are counted twice until the scope's next
// count: the cap errs on the safe side.
func (k *Keeper) recounted(counts map[string]int64) {
	scopes := make(map[string]*scopeCount, len(counts))
	for scope, n := range counts {
		scopes[scope] = k.newScopeCount(n)
	}
	k.mu.Lock()
	k.scopes = scopes
	k.mu.Unlock()
}
