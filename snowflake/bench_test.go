package snowflake

import (
	"testing"
)

// benchLayouts are the default layout, capped at 4096 IDs per millisecond,
// and one with 2^21 sequence numbers per millisecond, which shows the
// generator's own cost rather than the cap.
var benchLayouts = []struct {
	name string
	cfg  Config
}{
	{"layout=41-10-12", Config{}},
	{"layout=41-1-21", Config{TimeBits: 41, WorkerBits: 1, SequenceBits: 21}},
}

// reportRates reports the IDs issued per millisecond, per worker, as a
// share of the layout's cap too, and lock rounds per ID.
func reportRates(b *testing.B, g *Generator, ids int) {
	ms := float64(b.Elapsed().Nanoseconds()) / 1e6
	if ms == 0 || ids == 0 {
		return
	}
	perMs := float64(ids) / ms
	b.ReportMetric(perMs, "ids/ms/worker")
	b.ReportMetric(100*perMs/float64(g.Layout().MaxSequence()+1), "%cap")
	b.ReportMetric(float64(g.rounds())/float64(ids), "rounds/id")
}

func BenchmarkNext(b *testing.B) {
	for _, bl := range benchLayouts {
		b.Run(bl.name, func(b *testing.B) {
			g, err := New(bl.cfg)
			if err != nil {
				b.Fatal(err)
			}
			ids := 0
			for b.Loop() {
				if _, err := g.Next(); err != nil {
					b.Fatal(err)
				}
				ids++
			}
			reportRates(b, g, ids)
		})
	}
}

func BenchmarkNextParallel(b *testing.B) {
	for _, bl := range benchLayouts {
		b.Run(bl.name, func(b *testing.B) {
			g, err := New(bl.cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.Next(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportRates(b, g, b.N)
		})
	}
}

func BenchmarkNextN(b *testing.B) {
	const n = 100
	for _, bl := range benchLayouts {
		b.Run(bl.name, func(b *testing.B) {
			g, err := New(bl.cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			ids := 0
			for b.Loop() {
				batch, err := g.NextN(n)
				if err != nil || len(batch) != n {
					b.Fatal(err)
				}
				ids += n
			}
			reportRates(b, g, ids)
		})
	}
}

func BenchmarkAppendN(b *testing.B) {
	const n = 100
	g, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	buf := make([]int64, 0, n)
	ids := 0
	for b.Loop() {
		if buf, err = g.AppendN(buf[:0], n); err != nil {
			b.Fatal(err)
		}
		ids += n
	}
	reportRates(b, g, ids)
}
