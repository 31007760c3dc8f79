package segment_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"

	"github.com/idgen/idgen/internal/benchcpu"
)

// BenchmarkAtomicFloor is the floor the allocator's hot path is compared
// against in the same run: one bare atomic add per ID.
func BenchmarkAtomicFloor(b *testing.B) {
	var n atomic.Int64
	b.ReportAllocs()
	defer benchcpu.Report(b)()
	for b.Loop() {
		n.Add(1)
	}
}

// benchAlloc uses a large step so that loads, which happen in the
// background anyway, are rare.
func benchAlloc(b *testing.B) (*segment.Allocator, string) {
	a, _, tag := newAlloc(b, 1_000_000, segment.Options{})
	if _, err := a.Next(context.Background(), tag); err != nil {
		b.Fatal(err)
	}
	return a, tag
}

func BenchmarkNext(b *testing.B) {
	a, tag := benchAlloc(b)
	seq, err := a.Sequence(tag)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	defer benchcpu.Report(b)()
	for b.Loop() {
		if _, err := seq.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextByTag(b *testing.B) {
	a, tag := benchAlloc(b)
	ctx := context.Background()
	b.ReportAllocs()
	defer benchcpu.Report(b)()
	for b.Loop() {
		if _, err := a.Next(ctx, tag); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextParallel(b *testing.B) {
	a, tag := benchAlloc(b)
	seq, err := a.Sequence(tag)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := seq.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkNextN(b *testing.B) {
	a, tag := benchAlloc(b)
	seq, err := a.Sequence(tag)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	buf := make([]int64, 0, 100)
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = seq.AppendN(ctx, buf[:0], 100); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/id")
}

// BenchmarkNextByTag1000 is BenchmarkNextByTag over 1,000 tags in turn:
// the lookup with a table too big for the cache lines one tag touches.
func BenchmarkNextByTag1000(b *testing.B) {
	st := segmenttest.NewMemory()
	tags := make([]string, 1000)
	for i := range tags {
		tags[i] = fmt.Sprintf("tag-%d", i)
		if err := st.CreateTag(context.Background(), segment.Tag{Name: tags[i], MaxID: 1, Step: 1_000_000}); err != nil {
			b.Fatal(err)
		}
	}
	a, err := segment.New(st, segment.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	ctx := context.Background()
	for range 4 { // promoted into the read index
		for _, tag := range tags {
			if _, err := a.Next(ctx, tag); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	defer benchcpu.Report(b)()
	i := 0
	for b.Loop() {
		if _, err := a.Next(ctx, tags[i]); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(tags) {
			i = 0
		}
	}
}
