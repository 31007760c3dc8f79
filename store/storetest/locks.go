package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/lock/locktest"
	"github.com/idgen/idgen/store/fence"
)

// Locks runs the lock conformance suite (locktest) on the store's lock
// backend, each client a store of its own from open; Kill closes a
// client's store, which neither releases its grants nor removes its
// waiters: a crash, as far as the lock tables can tell.
func Locks(t *testing.T, open func(t *testing.T) Store) {
	var mu sync.Mutex
	stores := map[lock.Backend]Store{}
	locktest.Run(t, locktest.Config{
		Open: func(t *testing.T) lock.Backend {
			s := open(t)
			b := s.Locks()
			mu.Lock()
			stores[b] = s
			mu.Unlock()
			return b
		},
		Kill: func(t *testing.T, b lock.Backend) {
			mu.Lock()
			s := stores[b]
			mu.Unlock()
			_ = s.Close()
		},
	})
}

// LockTokens checks that lock tokens survive what IDs survive: after a
// failover that lost the last grants of one lock and the whole row of
// another (a new history, which the next grant fences), and after a
// restore of the lock table alone (no new history: the marks tell),
// every new token is above every token granted before.
func LockTokens(t *testing.T, open func(t *testing.T) Store) {
	t.Run("Failover", func(t *testing.T) { lockFailover(t, open) })
	t.Run("OneTableRestore", func(t *testing.T) { lockRestore(t, open) })
	t.Run("IdentityKept", func(t *testing.T) { lockIdentityKept(t, open) })
	t.Run("LiveHolderWitness", func(t *testing.T) { lockWitness(t, open) })
}

// lockWitness: a failover loses more grants of a lock than the fence's
// margin covers (a margin of 1), while the process that was granted them
// lives: another process's grant is held until that process checks in
// (its presence renewal), whose witness raise moves the lock above the
// token it holds. Without the hold, or without the raise, the other
// process was granted that token again (internal/sim found it behind two
// chained failovers, the second losing the first's fence).
func lockWitness(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	const lost = 3
	cfg := fence.Config{Margin: 1, LeaseTTL: FenceTTL}
	a := open(t)
	if err := a.ConfigureFence(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckIdentity(ctx); err != nil {
		t.Skipf("no fencing on this server: %v", err)
	}
	name := lockName("witness")
	grants(t, a.Locks(), name, 2)
	held, err := a.Locks().Acquire(ctx, name, "holder", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	// The failover: the holder's grant and the two before it are lost,
	// and the server is another history.
	execAll(t, a,
		fmt.Sprintf("UPDATE idgen_lock SET owner = '', expires_at = 0, token = token - %d WHERE name = '%s'", lost, name),
		fmt.Sprintf("UPDATE idgen_lock_mark SET token = token - %d WHERE name = '%s'", lost, name),
		"UPDATE idgen_fence SET system_id = 'another-history' WHERE id = 1")
	_, _ = a.DB().ExecContext(ctx, "UPDATE idgen_fence SET store_id = 'another-file' WHERE id = 1") // SQLite's own identity

	b := open(t)
	if err := b.ConfigureFence(cfg, nil); err != nil {
		t.Fatal(err)
	}
	var ev atomic.Pointer[fence.Event]
	b.ObserveFences(func(e fence.Event) { ev.Store(&e) })
	wctx, cancel := context.WithTimeout(ctx, 10*FenceTTL)
	defer cancel()
	g, err := b.Locks().Acquire(wctx, name, "after", time.Minute, true)
	if err != nil {
		t.Fatalf("the other process's grant after the fence: %v", err)
	}
	switch e := ev.Load(); {
	case e == nil:
		t.Fatal("the other process did not fence")
	case e.Plan.Margin >= lost:
		t.Fatalf("the margin %d covers the %d lost grants: the test would not test the witness raise", e.Plan.Margin, lost)
	}
	if g.Token <= held.Token {
		t.Fatalf("after the fence the other process was granted token %d, not above %d, which a live process holds", g.Token, held.Token)
	}
	// The holder's lease is lost, not renewed under another's token.
	if _, err := a.Locks().Renew(ctx, held, time.Minute); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("renewal of a grant the failover lost: %v, want ErrLost", err)
	}
}

// lockIdentityKept: the lock table and its marks go back together while
// the server's identity shows nothing (a restore of a server with no
// position, a lagging node). The process that was granted the lost
// tokens finds its lock below them and fences; a process started after
// it goes on above them too.
func lockIdentityKept(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	a := open(t)
	if err := a.ConfigureFence(fence.Config{Margin: FenceMargin, LeaseTTL: FenceTTL}, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckIdentity(ctx); err != nil {
		t.Skipf("no fencing on this server: %v", err)
	}
	var fences atomic.Int64
	a.ObserveFences(func(fence.Event) { fences.Add(1) })
	name := lockName("kept-identity")
	top := grants(t, a.Locks(), name, 4)
	execAll(t, a,
		fmt.Sprintf("UPDATE idgen_lock SET token = token - 2 WHERE name = '%s'", name),
		fmt.Sprintf("UPDATE idgen_lock_mark SET token = token - 2 WHERE name = '%s'", name))
	g, err := a.Locks().Acquire(ctx, name, "after", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if g.Token <= top || fences.Load() != 1 {
		t.Fatalf("after the lock went back under its granter: token %d (before: %d), %d fences; want above, 1", g.Token, top, fences.Load())
	}
	if err := a.Locks().Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if g2 := grants(t, open(t).Locks(), name, 1); g2 <= g.Token {
		t.Fatalf("a new process after the fence: token %d, not above %d", g2, g.Token)
	}
}

// lockName is a lock name no other test uses, safe in a SQL literal.
func lockName(what string) string {
	return fmt.Sprintf("locktokens-%s-%d", what, time.Now().UnixNano())
}

// grants grants name n times in a row, releasing each, and returns the
// last token. Each grant may wait out a fence's hold.
func grants(t *testing.T, b lock.Backend, name string, n int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*FenceTTL)
	defer cancel()
	var last int64
	for i := range n {
		g, err := b.Acquire(ctx, name, fmt.Sprintf("o%d", i), time.Minute, true)
		if err != nil {
			t.Fatal(err)
		}
		if g.Token <= last {
			t.Fatalf("grant %d of %q: token %d after %d", i, name, g.Token, last)
		}
		last = g.Token
		if err := b.Release(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	return last
}

func execAll(t *testing.T, s Store, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := s.DB().ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func lockFailover(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	cfg := fence.Config{Margin: FenceMargin, LeaseTTL: FenceTTL}
	a := open(t)
	if err := a.ConfigureFence(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckIdentity(ctx); err != nil {
		t.Skipf("no fencing on this server: %v", err)
	}
	kept, lost := lockName("kept"), lockName("lost")
	keptTop := grants(t, a.Locks(), kept, 5)
	grants(t, a.Locks(), lost, 2)
	held, err := a.Locks().Acquire(ctx, lost, "holder", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	lostTop := held.Token

	// The failover: the last 3 grants of kept are lost with their marks,
	// lost's row and mark are gone (created during the lag), and the
	// server is another history.
	execAll(t, a,
		fmt.Sprintf("UPDATE idgen_lock SET token = token - 3 WHERE name = '%s'", kept),
		fmt.Sprintf("UPDATE idgen_lock_mark SET token = token - 3 WHERE name = '%s'", kept),
		fmt.Sprintf("DELETE FROM idgen_lock WHERE name = '%s'", lost),
		fmt.Sprintf("DELETE FROM idgen_lock_mark WHERE name = '%s'", lost),
		"UPDATE idgen_fence SET system_id = 'another-history' WHERE id = 1")
	_, _ = a.DB().ExecContext(ctx, "UPDATE idgen_fence SET store_id = 'another-file' WHERE id = 1") // SQLite's own identity

	c := open(t)
	if err := c.ConfigureFence(cfg, nil); err != nil {
		t.Fatal(err)
	}
	var fences atomic.Int64
	c.ObserveFences(func(fence.Event) { fences.Add(1) })
	for _, tc := range []struct {
		name  string
		above int64
	}{{kept, keptTop}, {lost, lostTop}} {
		// Held until a's presence checks in; then granted.
		wctx, cancel := context.WithTimeout(ctx, 10*FenceTTL)
		g, err := c.Locks().Acquire(wctx, tc.name, "after", time.Minute, true)
		cancel()
		if err != nil {
			t.Fatalf("%s after the failover: %v", tc.name, err)
		}
		if g.Token <= tc.above {
			t.Fatalf("%s after the failover: token %d, not above %d granted before", tc.name, g.Token, tc.above)
		}
		t.Logf("%s: token %d before the failover, %d after", tc.name, tc.above, g.Token)
	}
	if fences.Load() != 1 {
		t.Fatalf("%d fences by the process that granted first after the failover, want 1", fences.Load())
	}
	// The holder of the lost grant cannot renew it: its lease is lost.
	if _, err := a.Locks().Renew(ctx, held, time.Minute); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("renewal of a grant the failover lost: %v, want ErrLost", err)
	}
}

func lockRestore(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	a := open(t)
	name, later := lockName("restored"), lockName("later")
	// The backup: taken while "old" held name.
	old, err := a.Locks().Acquire(ctx, name, "old", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Locks().Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	top := grants(t, a.Locks(), name, 4)
	laterTop := grants(t, a.Locks(), later, 3)

	// The lock table alone is put back to the backup: name's row shows
	// "old" holding it with its old token, and later has no row.
	execAll(t, a,
		fmt.Sprintf("UPDATE idgen_lock SET owner = 'old', token = %d, expires_at = %d WHERE name = '%s'", old.Token, time.Now().Add(time.Hour).UnixMilli(), name),
		fmt.Sprintf("DELETE FROM idgen_lock WHERE name = '%s'", later))

	b := open(t)
	// The restored grant is not the lock's last: renewing it is refused,
	// and the lock is free for others.
	if _, err := b.Locks().Renew(ctx, old, time.Minute); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("renewal of the grant a restore put back: %v, want ErrLost", err)
	}
	if info, err := b.Locks().Describe(ctx, name); err != nil || info.Holder != nil {
		t.Fatalf("describe after the restore: %+v, %v; want no holder", info, err)
	}
	for _, tc := range []struct {
		name  string
		above int64
	}{{name, top}, {later, laterTop}} {
		g, err := b.Locks().Acquire(ctx, tc.name, "after", time.Minute, false)
		if err != nil {
			t.Fatalf("%s after the restore: %v", tc.name, err)
		}
		if g.Token <= tc.above {
			t.Fatalf("%s after the restore: token %d, not above %d granted before", tc.name, g.Token, tc.above)
		}
	}
}
