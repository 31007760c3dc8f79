package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

// BenchReserve measures one reservation through today, a store on the
// same database without the identity check, and through fenced, the
// store as Open returns it, which checks the identity in the
// reservation's transaction, side by side in one run:
//
//   - check=today and check=fenced, one after the other, for benchstat
//     -col /check;
//   - check=paired, which alternates the two call by call, so that a
//     busy machine's drift hits both alike, and reports the median of
//     each one's latencies and the ratio of the medians (fenced/today).
func BenchReserve(b *testing.B, today, fenced segment.Store) {
	ctx := context.Background()
	tag := segmenttest.UniqueTag("bench")
	if err := fenced.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: 1000}); err != nil {
		b.Fatal(err)
	}
	reserve := func(b *testing.B, s segment.Store) {
		if _, err := s.Reserve(ctx, tag, 0); err != nil {
			b.Fatal(err)
		}
	}
	// The first reservation records the identity; keep it out.
	reserve(b, fenced)
	for _, s := range []struct {
		name  string
		store segment.Store
	}{{"check=today", today}, {"check=fenced", fenced}} {
		b.Run(s.name, func(b *testing.B) {
			for b.Loop() {
				reserve(b, s.store)
			}
		})
	}
	b.Run("check=paired", func(b *testing.B) {
		var lat [2][]time.Duration
		stores := [2]segment.Store{today, fenced}
		for i := 0; b.Loop(); i++ {
			for k := range 2 {
				j := (i + k) % 2 // alternate which goes first
				t0 := time.Now()
				reserve(b, stores[j])
				lat[j] = append(lat[j], time.Since(t0))
			}
		}
		med := func(d []time.Duration) float64 {
			slices.Sort(d)
			return float64(d[len(d)/2].Nanoseconds())
		}
		t, f := med(lat[0]), med(lat[1])
		b.ReportMetric(t, "today-ns/op")
		b.ReportMetric(f, "fenced-ns/op")
		b.ReportMetric(f/t, "fenced/today")
	})
}
