package httpbench

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	idgenclient "github.com/idgen/idgen/client"
	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/segment"
)

// grpcStreams are the concurrent calls of the throughput rows, over
// grpcConns connections: as wrk's -c16 and -c64 for HTTP.
var grpcStreams = []int{16, 64}

const grpcConns = 4

// TestLiveGRPC measures unary idgen.v1.IDService/Next of the real idgen
// binary (SQLite, --access-log=false) beside the floor's bare connect
// handler on the same server settings, rounds interleaved; then IDs/s of
// batches and of the gRPC-backed caching client.
func TestLiveGRPC(t *testing.T) {
	out := requireLive(t)
	p := currentPlan()
	dir := t.TempDir()
	floor := proctest.Start(t, buildFloor(t, dir), nil, "-addr", "127.0.0.1:0")
	idgen := proctest.Serve(t, proctest.Binary(t, dir), []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")}, "--access-log=false")
	ctx := t.Context()
	res := GRPCResult{Quick: *liveQuick, LoadAvg: LoadAvg{Start: loadAvg()}, Rounds: p.rounds, Seconds: p.round.Seconds(),
		Conns: grpcConns, Batch: batchSize}
	load := func(proc *proctest.Proc, req *idgenv1.NextRequest, streams int, d time.Duration) WrkResult {
		t.Helper()
		r, err := GRPCLoad{Base: proc.URL, Conns: grpcConns, Streams: streams, Duration: d, Request: req, PID: proc.PID()}.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Non2xx > 0 {
			t.Logf("%s: %d failed calls", proc.Addr(), r.Non2xx)
		}
		return r
	}
	one := &idgenv1.NextRequest{Tag: "order"}
	warm := min(p.round, 2*time.Second)
	load(floor, one, 64, warm)
	load(idgen, one, 64, warm)
	for _, streams := range grpcStreams {
		tp := Throughput{Conns: streams}
		for r := range p.rounds {
			tp.Floor = append(tp.Floor, load(floor, one, streams, p.round))
			tp.Idgen = append(tp.Idgen, load(idgen, one, streams, p.round))
			t.Logf("streams %d round %d: floor %.0f calls/s %.1f µs CPU/call, idgen %.0f calls/s %.1f µs CPU/call", streams, r+1,
				tp.Floor[r].RPS, tp.Floor[r].CPUPerRequest(), tp.Idgen[r].RPS, tp.Idgen[r].CPUPerRequest())
		}
		res.Throughput = append(res.Throughput, tp)
	}

	batch := &idgenv1.NextRequest{Tag: "order", Count: batchSize}
	load(idgen, batch, 64, warm)
	for r := range p.rounds {
		res.Batches = append(res.Batches, load(idgen, batch, 64, p.round))
		t.Logf("round %d, batches of %d: %.0f calls/s, %.2f M IDs/s", r+1, batchSize, res.Batches[r].RPS, res.Batches[r].RPS*batchSize/1e6)
	}

	for r := range p.rounds {
		ids, calls := cachingClient(t, idgen, p.round)
		res.CachingClient = append(res.CachingClient, ids)
		res.RangeCalls = append(res.RangeCalls, calls)
		t.Logf("round %d, caching client over gRPC: %.2f M IDs/s, %d ranges reserved", r+1, ids/1e6, calls)
	}
	res.LoadAvg.End = loadAvg()
	writeJSON(t, out, GRPCFile, res)
	t.Log("\n" + res.Markdown())
}

// cachingClient runs 8 callers of one client.WithGRPC caching allocator
// for d and returns IDs/s and how many ranges it reserved.
func cachingClient(t *testing.T, proc *proctest.Proc, d time.Duration) (float64, int64) {
	t.Helper()
	c, err := idgenclient.New(proc.URL, idgenclient.WithGRPC())
	if err != nil {
		t.Fatal(err)
	}
	obs := &loadCounter{}
	alloc, err := c.Segment(segment.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var n atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := alloc.Next(ctx, "cached"); err == nil {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds(), obs.loads.Load()
}

// loadCounter counts the allocator's successful range reservations.
type loadCounter struct{ loads atomic.Int64 }

func (l *loadCounter) SegmentLoaded(_ string, _ int64, _ time.Duration, err error) {
	if err == nil {
		l.loads.Add(1)
	}
}
func (l *loadCounter) WaitedForLoad(string) {}
