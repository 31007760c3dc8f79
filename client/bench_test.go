package client_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

// BenchmarkClient compares, in one run, IDs from locally cached ranges
// with one HTTP call per ID, against the same real server.
func BenchmarkClient(b *testing.B) {
	ts := startServer(b, filepath.Join(b.TempDir(), "bench.db"), server.Config{})
	c, err := client.New(ts.URL, client.WithMode("segment"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("cached-ranges", func(b *testing.B) {
		alloc, err := c.Segment(segment.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer alloc.Close()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := alloc.Next(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
	})
	b.Run("http-per-id", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Next(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
	})
}
