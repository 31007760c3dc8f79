// Package locktest is the conformance suite every lock.Backend passes,
// run by each backend's own tests against a real server, as
// segmenttest is for segment stores.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/lock"
)

// Config is what the suite needs from a backend.
type Config struct {
	// Open returns a new client of one shared backend: each is a
	// process of its own. The suite closes nothing; Open registers its
	// own cleanup.
	Open func(t *testing.T) lock.Backend
	// TTL is the shortest TTL the backend grants precisely (a lease
	// lapses within it): what the suite lets lapse. Zero means 1s.
	TTL time.Duration
	// Kill, if set, ends a client as a crash would: its connections
	// gone, nothing cleaned up (its waits stay queued until their own
	// TTL lapses). Without it the dead-waiter case is skipped.
	Kill func(t *testing.T, b lock.Backend)
}

// Run runs the suite.
func Run(t *testing.T, c Config) {
	if c.TTL == 0 {
		c.TTL = time.Second
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, c Config)
	}{
		{"TokenIncreases", tokenIncreases},
		{"Reentrant", reentrant},
		{"HeldNamesHolder", heldNamesHolder},
		{"RenewChecksOwnerAndToken", renewChecks},
		{"ReleaseNeverFreesANewerGrant", releaseChecks},
		{"LapsedIsTakenAndNotRenewed", lapsed},
		{"WaiterIsWoken", waiterWoken},
		{"WaitersInArrivalOrder", fifo},
		{"DeadWaiterSkipped", deadWaiter},
		{"WaitEndsWithContext", waitEnds},
		{"MutualExclusion", exclusion},
		{"Describe", describe},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, c) })
	}
}

var names atomic.Int64

// name returns a lock name no other case uses, also across test
// processes sharing a server.
func name(t *testing.T) string {
	return fmt.Sprintf("locktest-%s-%d-%d", t.Name(), time.Now().UnixNano(), names.Add(1))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// must(t)(b.Acquire(…)) fails t on an error.
func must(t *testing.T) func(lock.Grant, error) lock.Grant {
	return func(g lock.Grant, err error) lock.Grant {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
}

func tokenIncreases(t *testing.T, c Config) {
	ctx, a, b := ctxT(t), c.Open(t), c.Open(t)
	n := name(t)
	var last int64
	for i := range 6 {
		cl := []lock.Backend{a, b}[i%2]
		g := must(t)(cl.Acquire(ctx, n, fmt.Sprintf("owner-%d", i%3), 10*c.TTL, false))
		if g.Token <= last || g.Name != n {
			t.Fatalf("grant %d: %+v after token %d; want a token above it", i, g, last)
		}
		last = g.Token
		if err := cl.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	// Another name has tokens of its own, still above 0.
	g := must(t)(a.Acquire(ctx, name(t), "x", 10*c.TTL, false))
	if g.Token < 1 {
		t.Fatalf("first grant of a new name: token %d", g.Token)
	}
}

func reentrant(t *testing.T, c Config) {
	ctx, a, b := ctxT(t), c.Open(t), c.Open(t)
	n := name(t)
	g1 := must(t)(a.Acquire(ctx, n, "o", 10*c.TTL, false))
	g2 := must(t)(b.Acquire(ctx, n, "o", 20*c.TTL, true)) // another process of the same owner
	if g2.Token != g1.Token || !g2.Expires.After(g1.Expires) {
		t.Fatalf("reentrant acquire: %+v after %+v; want the same token, a later expiry", g2, g1)
	}
	if err := a.Release(ctx, g2); err != nil {
		t.Fatalf("one release of a reentrant grant: %v", err)
	}
	if g := must(t)(b.Acquire(ctx, n, "p", 10*c.TTL, false)); g.Token <= g1.Token {
		t.Fatalf("after the release, %+v; want a token above %d", g, g1.Token)
	}
}

func heldNamesHolder(t *testing.T, c Config) {
	ctx, a, b := ctxT(t), c.Open(t), c.Open(t)
	n := name(t)
	g := must(t)(a.Acquire(ctx, n, "holder", 10*c.TTL, false))
	_, err := b.Acquire(ctx, n, "other", 10*c.TTL, false)
	var he *lock.HeldError
	if !errors.As(err, &he) || !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("acquire of a held lock: %v; want a *HeldError", err)
	}
	if he.Holder.Owner != "holder" || he.Holder.Token != g.Token || he.Holder.Name != n {
		t.Fatalf("holder %+v; want %+v", he.Holder, g)
	}
}

func renewChecks(t *testing.T, c Config) {
	ctx, a := ctxT(t), c.Open(t)
	n := name(t)
	g := must(t)(a.Acquire(ctx, n, "o", 10*c.TTL, false))
	for _, bad := range []lock.Grant{
		{Name: n, Owner: "o", Token: g.Token + 1},
		{Name: n, Owner: "o", Token: g.Token - 1},
		{Name: n, Owner: "p", Token: g.Token},
	} {
		if _, err := a.Renew(ctx, bad, 10*c.TTL); !errors.Is(err, lock.ErrLost) {
			t.Errorf("renew of %+v while %+v holds: %v; want ErrLost", bad, g, err)
		}
	}
	r := must(t)(a.Renew(ctx, g, 20*c.TTL))
	if r.Token != g.Token || !r.Expires.After(g.Expires) {
		t.Fatalf("renewal %+v of %+v: want the same token, a later expiry", r, g)
	}
}

func releaseChecks(t *testing.T, c Config) {
	ctx, a, b := ctxT(t), c.Open(t), c.Open(t)
	n := name(t)
	old := must(t)(a.Acquire(ctx, n, "o", 10*c.TTL, false))
	if err := a.Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	cur := must(t)(b.Acquire(ctx, n, "o", 10*c.TTL, false)) // the same owner, a newer grant
	for _, stale := range []lock.Grant{old, {Name: n, Owner: "p", Token: cur.Token}} {
		if err := a.Release(ctx, stale); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("release of %+v while %+v holds: %v; want ErrNotHeld", stale, cur, err)
		}
	}
	if _, err := b.Renew(ctx, cur, 10*c.TTL); err != nil {
		t.Fatalf("the newer grant after stale releases: %v", err)
	}
}

func lapsed(t *testing.T, c Config) {
	ctx, a, b := ctxT(t), c.Open(t), c.Open(t)
	n := name(t)
	g := must(t)(a.Acquire(ctx, n, "sleeper", c.TTL, false))
	// Poll until another owner can take it: the backend's clock decides
	// when the lease lapsed.
	var taken lock.Grant
	var last error
	if !testtime.Until(10*c.TTL, c.TTL/20, func() bool {
		taken, last = b.Acquire(ctx, n, "taker", 10*c.TTL, false)
		return last == nil || !errors.Is(last, lock.ErrHeld)
	}) || last != nil {
		t.Fatalf("acquire after the holder's TTL: %v", last)
	}
	if taken.Token <= g.Token {
		t.Fatalf("grant %+v after a lapsed %+v: want a higher token", taken, g)
	}
	if _, err := a.Renew(ctx, g, 10*c.TTL); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("renewal of the lapsed, taken grant: %v; want ErrLost", err)
	}
	if err := a.Release(ctx, g); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release of the lapsed, taken grant: %v; want ErrNotHeld", err)
	}
}

// waitFor fails t unless cond holds within a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !testtime.Until(time.Minute, time.Millisecond, cond) {
		t.Fatalf("timed out waiting until %s", what)
	}
}

type result struct {
	g   lock.Grant
	err error
	at  time.Time
}

func wait(ctx context.Context, b lock.Backend, n, owner string, ttl time.Duration) chan result {
	ch := make(chan result, 1)
	go func() {
		g, err := b.Acquire(ctx, n, owner, ttl, true)
		ch <- result{g, err, time.Now()}
	}()
	return ch
}

// Queued reports whether owner waits for lock n of b (Describe): for a
// test that must know a wait has begun.
func Queued(ctx context.Context, b lock.Backend, n, owner string) bool {
	info, err := b.Describe(ctx, n)
	if err != nil {
		return false
	}
	for _, w := range info.Waiters {
		if w.Owner == owner {
			return true
		}
	}
	return false
}

func waiterWoken(t *testing.T, c Config) {
	ctx, a, b := ctxT(t), c.Open(t), c.Open(t)
	n := name(t)
	var handoffs []time.Duration
	for i := range 5 {
		g := must(t)(a.Acquire(ctx, n, "holder", 10*c.TTL, false))
		ch := wait(ctx, b, n, "waiter", 10*c.TTL)
		waitFor(t, "the waiter is queued", func() bool { return Queued(ctx, a, n, "waiter") })
		released := time.Now()
		if err := a.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
		r := <-ch
		if r.err != nil || r.g.Token <= g.Token {
			t.Fatalf("round %d: the waiter got %+v, %v after %+v was released", i, r.g, r.err, g)
		}
		handoffs = append(handoffs, r.at.Sub(released))
		if err := b.Release(ctx, r.g); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("hand-off to a queued waiter: %v", handoffs)
}

func fifo(t *testing.T, c Config) {
	ctx, a := ctxT(t), c.Open(t)
	n := name(t)
	g := must(t)(a.Acquire(ctx, n, "holder", 10*c.TTL, false))
	var chans []chan result
	for i := range 4 {
		owner := fmt.Sprintf("w%d", i)
		chans = append(chans, wait(ctx, c.Open(t), n, owner, 10*c.TTL))
		waitFor(t, owner+" is queued", func() bool { return Queued(ctx, a, n, owner) })
	}
	prev := g
	for i, ch := range chans {
		if err := a.Release(ctx, prev); err != nil && i == 0 {
			t.Fatal(err)
		}
		r := <-ch
		if r.err != nil || r.g.Owner != fmt.Sprintf("w%d", i) || r.g.Token <= prev.Token {
			t.Fatalf("grant %d: %+v, %v; want w%d with a token above %d", i, r.g, r.err, i, prev.Token)
		}
		prev = r.g
		a = c.Open(t)
	}
}

func deadWaiter(t *testing.T, c Config) {
	if c.Kill == nil {
		t.Skip("no Kill for this backend")
	}
	ctx, a := ctxT(t), c.Open(t)
	n := name(t)
	g := must(t)(a.Acquire(ctx, n, "holder", 10*c.TTL, false))
	for i := range 3 {
		dead := c.Open(t)
		owner := fmt.Sprintf("dead%d", i)
		_ = wait(ctx, dead, n, owner, 10*c.TTL)
		waitFor(t, owner+" is queued", func() bool { return Queued(ctx, a, n, owner) })
		c.Kill(t, dead)
	}
	live := wait(ctx, c.Open(t), n, "live", 10*c.TTL)
	waitFor(t, "live is queued", func() bool { return Queued(ctx, a, n, "live") })
	released := time.Now()
	if err := a.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	r := <-live
	if r.err != nil || r.g.Owner != "live" {
		t.Fatalf("the live waiter behind 3 dead ones: %+v, %v", r.g, r.err)
	}
	t.Logf("granted past 3 dead waiters %v after the release", r.at.Sub(released))
}

func waitEnds(t *testing.T, c Config) {
	ctx, a, b := ctxT(t), c.Open(t), c.Open(t)
	n := name(t)
	g := must(t)(a.Acquire(ctx, n, "holder", 10*c.TTL, false))
	wctx, cancel := context.WithTimeout(ctx, c.TTL/4)
	defer cancel()
	_, err := b.Acquire(wctx, n, "waiter", 10*c.TTL, true)
	var he *lock.HeldError
	if !errors.As(err, &he) || he.Holder.Token != g.Token {
		t.Fatalf("a wait whose context ended: %v; want a *HeldError naming %+v", err, g)
	}
	// The waiter that gave up is not granted later.
	if err := a.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if g2 := must(t)(a.Acquire(ctx, n, "third", 10*c.TTL, false)); g2.Owner != "third" {
		t.Fatalf("after the waiter gave up: %+v", g2)
	}
}

// exclusion runs goroutines over several clients that take the lock in
// turn: no two hold it at once, and tokens rise in grant order.
func exclusion(t *testing.T, c Config) {
	ctx := ctxT(t)
	n := name(t)
	const workers, rounds = 4, 8
	var (
		mu     sync.Mutex
		inside int
		last   int64
		errs   []error
		wg     sync.WaitGroup
	)
	for w := range workers {
		b := c.Open(t)
		wg.Go(func() {
			for r := range rounds {
				g, err := b.Acquire(ctx, n, fmt.Sprintf("w%d", w), 10*c.TTL, true)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("worker %d round %d: %w", w, r, err))
					mu.Unlock()
					return
				}
				mu.Lock()
				inside++
				if inside != 1 || g.Token <= last {
					errs = append(errs, fmt.Errorf("worker %d got %+v with %d inside, after token %d", w, g, inside, last))
				}
				last = g.Token
				mu.Unlock()
				mu.Lock()
				inside--
				mu.Unlock()
				if err := b.Release(ctx, g); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func describe(t *testing.T, c Config) {
	ctx, a := ctxT(t), c.Open(t)
	n := name(t)
	if info, err := a.Describe(ctx, n); err != nil || info.Holder != nil || len(info.Waiters) != 0 {
		t.Fatalf("a lock never taken: %+v, %v; want free with no waiters", info, err)
	}
	before := time.Now().Add(-time.Second) // the backend's clock may differ a little
	g := must(t)(a.Acquire(ctx, n, "holder", 10*c.TTL, false))
	_ = wait(ctx, c.Open(t), n, "w", 10*c.TTL)
	waitFor(t, "w is queued", func() bool { return Queued(ctx, a, n, "w") })
	info, err := a.Describe(ctx, n)
	switch {
	case err != nil:
		t.Fatal(err)
	case info.Holder == nil || info.Holder.Owner != "holder" || info.Holder.Token != g.Token:
		t.Fatalf("holder %+v; want %+v", info.Holder, g)
	case info.Since.Before(before) || info.Since.After(g.Expires):
		t.Fatalf("since %v; want between %v and the expiry %v", info.Since, before, g.Expires)
	case len(info.Waiters) != 1 || info.Waiters[0].Owner != "w" || info.Waiters[0].Since.Before(before):
		t.Fatalf("waiters %+v; want w alone", info.Waiters)
	}
}
