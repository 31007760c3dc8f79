package etcdstore

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/idgen/idgen/store/dbtest"
)

// BenchmarkAcquireRelease is one uncontended acquire and release, beside
// the floor issue 41 names: a bare concurrency.Mutex Lock and Unlock on
// a session made once (whose key lives on the session's lease: no
// per-grant TTL, no fencing of the release).
func BenchmarkAcquireRelease(b *testing.B) {
	e := dbtest.StartEtcd(b)
	r := newRig(e.Endpoints)
	ctx := context.Background()
	b.Run("etcdstore", func(b *testing.B) {
		s := r.open(b)
		for b.Loop() {
			g, err := s.Acquire(ctx, "bench", "o", 10*time.Second, false)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Release(ctx, g); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("floor=concurrency.Mutex", func(b *testing.B) {
		cli := r.client(b)
		defer cli.Close()
		sess, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		m := concurrency.NewMutex(sess, "bench-floor")
		for b.Loop() {
			if err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
