package lock_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/store"
	"github.com/idgen/idgen/store/sqlite"
)

// The Locker's and the Lease's own behaviour, over the real SQLite
// backend (store.Store.Locks): the backends' contract is locktest's.

const ttl = 300 * time.Millisecond

func open(t *testing.T, path string) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return st
}

func newLocker(t *testing.T, st *store.Store) *lock.Locker {
	t.Helper()
	l, err := lock.New(st.Locks(), lock.Options{MinTTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNew_RefusesBadOptions(t *testing.T) {
	t.Parallel()
	st := open(t, filepath.Join(t.TempDir(), "idgen.db"))
	for _, o := range []lock.Options{
		{MinTTL: time.Millisecond},
		{MinTTL: time.Minute, MaxTTL: time.Second},
		{RenewEvery: 1},
	} {
		if _, err := lock.New(st.Locks(), o); !errors.Is(err, lock.ErrInvalidOptions) {
			t.Errorf("New(%+v): %v; want ErrInvalidOptions", o, err)
		}
	}
	if _, err := lock.New(nil, lock.Options{}); !errors.Is(err, lock.ErrInvalidOptions) {
		t.Errorf("New(nil): %v; want ErrInvalidOptions", err)
	}
}

func TestLocker_RefusesBadRequests(t *testing.T) {
	t.Parallel()
	l := newLocker(t, open(t, filepath.Join(t.TempDir(), "idgen.db")))
	for _, tc := range []struct {
		name, owner string
		ttl         time.Duration
		want        error
	}{
		{"", "o", time.Second, lock.ErrInvalidName},
		{strings.Repeat("n", lock.MaxNameLen+1), "o", time.Second, lock.ErrInvalidName},
		{"a\nb", "o", time.Second, lock.ErrInvalidName},
		{"bad\xff", "o", time.Second, lock.ErrInvalidName},
		{"n", "", time.Second, lock.ErrInvalidOwner},
		{"n", strings.Repeat("o", lock.MaxOwnerLen+1), time.Second, lock.ErrInvalidOwner},
		{"n", "o", 50 * time.Millisecond, lock.ErrInvalidTTL},
		{"n", "o", time.Hour, lock.ErrInvalidTTL},
	} {
		if _, err := l.TryAcquire(context.Background(), tc.name, tc.owner, tc.ttl); !errors.Is(err, tc.want) {
			t.Errorf("TryAcquire(%q, %q, %v): %v; want %v", tc.name, tc.owner, tc.ttl, err, tc.want)
		}
	}
}

// A lease outlives its TTL while the watchdog renews it, and another
// owner is refused all along.
func TestLease_RenewsWhileHeld(t *testing.T) {
	t.Parallel()
	// Twice the package's TTL: a renewal 200 ms late on two loaded cores
	// lost a 300 ms lease, and the other owner was granted it rightly.
	const ttl = 2 * ttl
	path := filepath.Join(t.TempDir(), "idgen.db")
	a, b := newLocker(t, open(t, path)), newLocker(t, open(t, path))
	ctx := context.Background()
	le, err := a.TryAcquire(ctx, "n", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	first := le.Grant().Expires
	renewals := 0
	waitFor(t, "the lease is renewed past three of its TTLs", func() bool {
		if _, err := b.TryAcquire(ctx, "n", "b", ttl); !errors.Is(err, lock.ErrHeld) {
			t.Fatalf("another owner while the lease is renewed: %v; want ErrHeld", err)
		}
		if e := le.Grant().Expires; e.After(first) {
			renewals++
			first = e
		}
		return renewals >= 3 && le.Err() == nil
	})
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A grant taken over is reported: Lost closes, the context ends with
// ErrLost, and Release says so.
func TestLease_LostWhenTakenOver(t *testing.T) {
	t.Parallel()
	st := open(t, filepath.Join(t.TempDir(), "idgen.db"))
	l := newLocker(t, st)
	ctx := context.Background()
	le, err := l.TryAcquire(ctx, "n", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, "UPDATE idgen_lock SET owner = 'thief', token = token + 1 WHERE name = 'n'"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-le.Lost():
	case <-time.After(time.Minute):
		t.Fatal("the lease taken over was not reported lost")
	}
	if err := context.Cause(le.Context()); !errors.Is(err, lock.ErrLost) || !errors.Is(le.Err(), lock.ErrLost) {
		t.Fatalf("cause %v, Err %v; want ErrLost", err, le.Err())
	}
	if err := le.Release(ctx); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release of a lost lease: %v; want its ErrLost", err)
	}
}

// Renewals that fail until the TTL runs out lose the lease: the backend
// may still show it, but the holder must stop.
func TestLease_ExpiresWhenRenewalsFail(t *testing.T) {
	t.Parallel()
	st := open(t, filepath.Join(t.TempDir(), "idgen.db"))
	l := newLocker(t, st)
	le, err := l.TryAcquire(context.Background(), "n", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	_ = st.DB().Close() // every renewal fails from now
	select {
	case <-le.Lost():
	case <-time.After(time.Minute):
		t.Fatal("the lease whose renewals fail was not reported lost")
	}
	if !errors.Is(le.Err(), lock.ErrExpired) {
		t.Fatalf("Err %v; want ErrExpired", le.Err())
	}
}

// Release ends the watchdog before it frees the lock: the context ends
// with ErrReleased, Lost stays open, the lock is free, and no renewal
// comes after.
func TestLease_ReleaseStopsTheWatchdog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idgen.db")
	st := open(t, path)
	a, b := newLocker(t, st), newLocker(t, open(t, path))
	ctx := context.Background()
	le, err := a.TryAcquire(ctx, "n", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := context.Cause(le.Context()); !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("context cause after Release: %v; want ErrReleased", err)
	}
	select {
	case <-le.Lost():
		t.Fatal("Lost closed by a release")
	default:
	}
	if err := le.Release(ctx); err != nil {
		t.Fatalf("a second Release: %v", err)
	}
	nb, err := b.TryAcquire(ctx, "n", "b", ttl)
	if err != nil {
		t.Fatalf("the released lock: %v", err)
	}
	// b keeps it past the times a's watchdog would have renewed.
	before := nb.Grant().Expires
	waitFor(t, "b's lease is renewed", func() bool { return nb.Grant().Expires.After(before) })
	info, err := st.Locks().Describe(ctx, "n")
	if err != nil || info.Holder == nil || info.Holder.Owner != "b" {
		t.Fatalf("after a's release and b's renewal: %+v, %v; want b holding", info, err)
	}
	if err := nb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// The same owner acquiring a lock it holds gets the same lease back.
func TestLocker_ReentrantByOwner(t *testing.T) {
	t.Parallel()
	l := newLocker(t, open(t, filepath.Join(t.TempDir(), "idgen.db")))
	ctx := context.Background()
	a, err := l.TryAcquire(ctx, "n", "o", ttl)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, "n", "o", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.Token() != b.Token() {
		t.Fatalf("a reentrant acquire gave another lease: %+v, %+v", a.Grant(), b.Grant())
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := l.TryAcquire(ctx, "n", "p", ttl)
	if err != nil || c.Token() <= a.Token() {
		t.Fatalf("after one release: %v, %v; want the lock free with a higher token", c, err)
	}
}

// A waiter granted after waiting longer than its TTL holds a live lease:
// its deadline counts from the renewal that follows the wait.
func TestLocker_WaitLongerThanTTL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idgen.db")
	a, b := newLocker(t, open(t, path)), newLocker(t, open(t, path))
	ctx := context.Background()
	held, err := a.TryAcquire(ctx, "n", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lock.Lease, 1)
	go func() {
		le, err := b.Acquire(ctx, "n", "b", ttl)
		if err != nil {
			t.Error(err)
		}
		got <- le
	}()
	// a holds it through several of b's TTLs before releasing.
	first := held.Grant().Expires
	waitFor(t, "a held it two TTLs more", func() bool { return held.Grant().Expires.Sub(first) >= 2*ttl })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	le := <-got
	if le == nil {
		return
	}
	renewed := le.Grant().Expires
	waitFor(t, "the waiter's lease is renewed", func() bool { return le.Grant().Expires.After(renewed) })
	if le.Err() != nil {
		t.Fatalf("the waiter's lease: %v; want it held", le.Err())
	}
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Do releases whatever fn does, panics included.
func TestLocker_DoReleases(t *testing.T) {
	t.Parallel()
	l := newLocker(t, open(t, filepath.Join(t.TempDir(), "idgen.db")))
	ctx := context.Background()
	boom := errors.New("boom")
	if err := l.Do(ctx, "n", "o", ttl, func(context.Context, *lock.Lease) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do: %v; want fn's error", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = l.Do(ctx, "n", "o", ttl, func(context.Context, *lock.Lease) error { panic("fn panics") })
	}()
	le, err := l.TryAcquire(ctx, "n", "other", ttl)
	if err != nil {
		t.Fatalf("after Do's error and panic: %v; want the lock free", err)
	}
	_ = le.Release(ctx)
}

// waitFor fails t unless cond holds within a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !testtime.Until(time.Minute, time.Millisecond, cond) {
		t.Fatalf("timed out waiting until %s", what)
	}
}
