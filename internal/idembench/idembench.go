// Package idembench times keyed ID requests through the whole server
// beside a floor on the same database. It lives apart from storetest so
// that the store's conformance suite does not import the server.
package idembench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

// benchParallelism is the goroutines per core of the keyed benchmarks:
// both sides wait on the database, so more than one per core keeps it
// busy, and both get the same.
const benchParallelism = 8

// BenchIdempotency times keyed ID requests through the whole server
// (a new key each, so each one inserts, allocates and completes) beside
// floor, which must run the single-row INSERT … ON CONFLICT DO NOTHING
// of a new key on the same database, durably (on the store's own pool,
// as an application writes its orders), in one run. seg serves the IDs;
// idem keeps the keys.
func BenchIdempotency(b *testing.B, seg segment.Store, idem idempotency.Store, floor func(ctx context.Context, key string) error) {
	gin.SetMode(gin.ReleaseMode)
	ctx := context.Background()
	alloc, err := segment.New(seg, segment.Options{AutoCreate: true, DefaultStep: 10000})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = alloc.Close() })
	k, err := idempotency.New(idem, idempotency.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = k.Close() })
	h, err := server.New(server.Config{Segment: alloc, Idempotency: k})
	if err != nil {
		b.Fatal(err)
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var n atomic.Int64
	// Warm both up first (a fresh database container's first seconds are
	// its slowest, and the first side timed would pay for them), 8
	// goroutines of 50 each.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/id/bench", nil)
				req.Header["Idempotency-Key"] = []string{run + "-" + strconv.FormatInt(n.Add(1), 10)}
				h.ServeHTTP(httptest.NewRecorder(), req)
				_ = floor(ctx, run+"-"+strconv.FormatInt(n.Add(1), 10))
			}
		})
	}
	wg.Wait()

	b.Run("keyed", func(b *testing.B) {
		b.SetParallelism(benchParallelism)
		b.RunParallel(func(pb *testing.PB) {
			w := httptest.NewRecorder()
			for pb.Next() {
				req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/id/bench", nil)
				req.Header["Idempotency-Key"] = []string{run + "-" + strconv.FormatInt(n.Add(1), 10)}
				w.Body.Reset()
				clear(w.Header())
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Errorf("%d %s", w.Code, w.Body)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	})
	b.Run("floor", func(b *testing.B) {
		b.SetParallelism(benchParallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := floor(ctx, run+"-"+strconv.FormatInt(n.Add(1), 10)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	})
}
