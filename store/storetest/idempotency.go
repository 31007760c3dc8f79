package storetest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/store/dbtest"
)

// IdempotencyNow is the time RunIdempotency starts from: a store that
// keeps a clock of its own (Redis expires rows by TTL) must count its
// TTLs from it.
var IdempotencyNow = time.UnixMilli(1_700_000_000_000)

// RunIdempotency is the conformance suite of an idempotency.Store: the
// insert-if-absent, the owner compare-and-sets, expiry, sweeps in
// batches and counts by scope, and one winner among concurrent
// inserts. st must be empty.
func RunIdempotency(t *testing.T, st idempotency.Store) {
	ctx := context.Background()
	now := IdempotencyNow
	rec := func(key, owner string, ttl time.Duration) idempotency.Record {
		return idempotency.Record{Scope: "s1", Key: key, Fingerprint: "fp-" + key, Owner: owner,
			LockedUntil: now.Add(10 * time.Second), ExpiresAt: now.Add(ttl)}
	}
	must := func(ok bool, err error) bool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	t.Run("InsertGetComplete", func(t *testing.T) {
		r := rec("Key-1", "owner-a", time.Hour)
		if !must(st.Insert(ctx, r)) {
			t.Fatal("first Insert did not insert")
		}
		if must(st.Insert(ctx, rec("Key-1", "owner-b", time.Hour))) {
			t.Fatal("second Insert of one key inserted")
		}
		// Keys compare byte for byte, and scopes apart.
		if !must(st.Insert(ctx, rec("key-1", "owner-b", time.Hour))) {
			t.Fatal("Key-1 and key-1 are one key")
		}
		other := rec("Key-1", "owner-b", time.Hour)
		other.Scope = "s2"
		if !must(st.Insert(ctx, other)) {
			t.Fatal("the same key in another scope did not insert")
		}
		got, found, err := st.Get(ctx, "s1", "Key-1")
		if err != nil || !found || got.Owner != "owner-a" || got.Status != 0 || got.Fingerprint != r.Fingerprint ||
			!got.LockedUntil.Equal(r.LockedUntil) || !got.ExpiresAt.Equal(r.ExpiresAt) || len(got.Body) != 0 {
			t.Fatalf("Get: %+v %v %v", got, found, err)
		}
		if _, found, _ := st.Get(ctx, "s1", "missing"); found {
			t.Fatal("Get found a missing key")
		}
		if must(st.Complete(ctx, "s1", "Key-1", "owner-b", 200, "x", []byte("no"))) {
			t.Fatal("Complete by another owner")
		}
		body := bytes.Repeat([]byte(`"1234567890123456789",`), 20000) // a batch of 20,000: above 64 KiB
		if !must(st.Complete(ctx, "s1", "Key-1", "owner-a", 200, "application/json", body)) {
			t.Fatal("Complete by the owner did not complete")
		}
		if must(st.Complete(ctx, "s1", "Key-1", "owner-a", 200, "application/json", []byte("again"))) {
			t.Fatal("Complete twice")
		}
		got, _, _ = st.Get(ctx, "s1", "Key-1")
		if got.Status != 200 || got.ContentType != "application/json" || !bytes.Equal(got.Body, body) {
			t.Fatalf("after Complete: status %d type %q body of %d bytes", got.Status, got.ContentType, len(got.Body))
		}
		// Delete removes only an owned row in flight.
		must(true, st.Delete(ctx, "s1", "Key-1", "owner-a"))
		if _, found, _ := st.Get(ctx, "s1", "Key-1"); !found {
			t.Fatal("Delete removed a completed row")
		}
		must(true, st.Delete(ctx, "s1", "key-1", "owner-a"))
		if _, found, _ := st.Get(ctx, "s1", "key-1"); !found {
			t.Fatal("Delete by another owner removed the row")
		}
		must(true, st.Delete(ctx, "s1", "key-1", "owner-b"))
		if _, found, _ := st.Get(ctx, "s1", "key-1"); found {
			t.Fatal("Delete by the owner left the row")
		}
	})

	t.Run("TakeOver", func(t *testing.T) {
		r := rec("take", "old", time.Hour)
		must(st.Insert(ctx, r))
		next := rec("take", "new", time.Hour)
		next.LockedUntil, next.Fingerprint = now.Add(20*time.Second), "fp-new"
		if must(st.TakeOver(ctx, next, "old", now.Add(9*time.Second))) {
			t.Fatal("TakeOver before the lock expired")
		}
		if must(st.TakeOver(ctx, next, "wrong", now.Add(10*time.Second))) {
			t.Fatal("TakeOver with the wrong previous owner")
		}
		if !must(st.TakeOver(ctx, next, "old", now.Add(10*time.Second))) {
			t.Fatal("TakeOver at the lock's expiry did not take over")
		}
		if must(st.Complete(ctx, "s1", "take", "old", 200, "", []byte("old"))) {
			t.Fatal("the old owner completed after the take-over")
		}
		got, _, _ := st.Get(ctx, "s1", "take")
		if got.Owner != "new" || got.Fingerprint != "fp-new" || !got.LockedUntil.Equal(next.LockedUntil) {
			t.Fatalf("after TakeOver: %+v", got)
		}
		// A completed row is taken over only once expired.
		must(st.Complete(ctx, "s1", "take", "new", 200, "t", []byte("b")))
		again := rec("take", "third", 2*time.Hour)
		if must(st.TakeOver(ctx, again, "new", now.Add(30*time.Second))) {
			t.Fatal("TakeOver of a live completed row")
		}
		if !must(st.TakeOver(ctx, again, "new", now.Add(time.Hour))) {
			t.Fatal("TakeOver of an expired completed row did not take over")
		}
		got, _, _ = st.Get(ctx, "s1", "take")
		if got.Status != 0 || len(got.Body) != 0 || got.ContentType != "" {
			t.Fatalf("a taken-over row keeps its old answer: %+v", got)
		}
	})

	t.Run("Renew", func(t *testing.T) {
		must(st.Insert(ctx, rec("renew", "owner-a", time.Hour)))
		later := now.Add(time.Minute)
		if must(st.Renew(ctx, "s1", "renew", "owner-b", later)) {
			t.Fatal("Renew by another owner")
		}
		if !must(st.Renew(ctx, "s1", "renew", "owner-a", later)) {
			t.Fatal("Renew by the owner did not renew")
		}
		got, _, _ := st.Get(ctx, "s1", "renew")
		if !got.LockedUntil.Equal(later) || !got.ExpiresAt.Equal(now.Add(time.Hour)) || got.Owner != "owner-a" || got.Status != 0 {
			t.Fatalf("after Renew: %+v; want the lock at %v and the rest as it was", got, later)
		}
		// The renewed lock holds off a take-over until it expires.
		next := rec("renew", "owner-b", time.Hour)
		if must(st.TakeOver(ctx, next, "owner-a", now.Add(30*time.Second))) {
			t.Fatal("TakeOver within the renewed lock")
		}
		must(st.Complete(ctx, "s1", "renew", "owner-a", 200, "t", []byte("b")))
		if must(st.Renew(ctx, "s1", "renew", "owner-a", later.Add(time.Minute))) {
			t.Fatal("Renew of a completed row")
		}
		if must(st.Renew(ctx, "s1", "gone", "owner-a", later)) {
			t.Fatal("Renew of a missing row")
		}
		must(true, st.Delete(ctx, "s1", "renew", "owner-a")) // completed: stays, swept below
	})

	t.Run("SweepAndCount", func(t *testing.T) {
		base := now.Add(100 * time.Hour) // past every row above
		n, err := st.Sweep(ctx, base, 1000)
		if err != nil || n != 4 { // take, renew, and the two Key-1 of s1 and s2
			t.Fatalf("sweep of the rows above: %d %v; want 4", n, err)
		}
		for i := range 25 {
			r := rec(fmt.Sprint("sw", i), "o", time.Duration(i%2+1)*time.Hour)
			r.ExpiresAt = base.Add(time.Duration(i%2+1) * time.Hour)
			if i >= 20 {
				r.Scope = "s2"
			}
			must(st.Insert(ctx, r))
		}
		counts, err := st.Count(ctx, base)
		if err != nil || counts["s1"] != 20 || counts["s2"] != 5 || len(counts) != 2 {
			t.Fatalf("Count: %v %v", counts, err)
		}
		if n, err := st.CountScope(ctx, "s2", base); err != nil || n != 5 {
			t.Fatalf("CountScope s2: %d %v; want 5", n, err)
		}
		if n, err := st.CountScope(ctx, "none", base); err != nil || n != 0 {
			t.Fatalf("CountScope of an unknown scope: %d %v; want 0", n, err)
		}
		// 13 rows expire at +1h: two batches of 5, then 3.
		at := base.Add(time.Hour)
		if n, err := st.CountExpired(ctx, at); err != nil || n != 13 {
			t.Fatalf("CountExpired: %d %v; want 13", n, err)
		}
		if n, _ := st.CountScope(ctx, "s1", at); n != 10 {
			t.Fatalf("CountScope s1 at +1h: %d; want 10", n)
		}
		for _, want := range []int{5, 5, 3, 0} {
			if n, err := st.Sweep(ctx, at, 5); err != nil || n != want {
				t.Fatalf("sweep: %d %v; want %d", n, err, want)
			}
		}
		counts, _ = st.Count(ctx, at)
		if n, err := st.CountExpired(ctx, at); err != nil || n != 0 {
			t.Fatalf("CountExpired after the sweep: %d %v; want 0", n, err)
		}
		if counts["s1"]+counts["s2"] != 12 {
			t.Fatalf("Count after the sweep: %v; want 12 live", counts)
		}
		if n, _ := st.Sweep(ctx, base.Add(2*time.Hour), 100); n != 12 {
			t.Fatalf("final sweep: %d; want 12", n)
		}
	})

	t.Run("ConcurrentInsertsOneWinner", func(t *testing.T) {
		for k := range 20 {
			var wins atomic.Int32
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					ok, err := st.Insert(ctx, rec(fmt.Sprint("race", k), fmt.Sprint("o", i), time.Hour))
					if err != nil {
						t.Error(err)
					}
					if ok {
						wins.Add(1)
					}
				})
			}
			wg.Wait()
			if wins.Load() != 1 {
				t.Fatalf("key %d: %d winners; want 1", k, wins.Load())
			}
		}
	})
}

// Migrated starts a database server of kind k, opens a store of it with
// open and migrates it; the store is closed when tb ends.
func Migrated[S interface {
	Migrate(ctx context.Context, logger *slog.Logger) (int64, error)
	Close() error
}](tb testing.TB, k dbtest.Kind, open func(ctx context.Context, dsn string) (S, error)) S {
	tb.Helper()
	srv := dbtest.Start(tb, k)
	ctx := context.Background()
	st, err := open(ctx, srv.DSN)
	if err != nil {
		tb.Fatalf("open %s: %v", k.Name, err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(ctx, nil); err != nil {
		tb.Fatalf("migrate %s: %v", k.Name, err)
	}
	return st
}
