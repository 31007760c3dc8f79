package httpbench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/postgres"
)

var (
	liveOut   = flag.String("live.out", "", "directory for the JSON results of the TestLive… measurements; empty skips them")
	liveQuick = flag.Bool("live.quick", false, "short runs, to try the TestLive… measurements out; the numbers are not for quoting")
)

// plan is how long each live measurement runs.
type plan struct {
	rounds int           // repetitions of each HTTP measurement
	round  time.Duration // length of each
	hidden time.Duration // length of each hidden-latency run
	// rideWarmup is the steady load before the database stops; rideCap
	// bounds the outage and the wait for recovery.
	rideWarmup, rideCap time.Duration
}

func currentPlan() plan {
	if *liveQuick {
		return plan{rounds: 1, round: time.Second, hidden: 5 * time.Second, rideWarmup: 5 * time.Second, rideCap: 20 * time.Second}
	}
	// Many short rounds rather than a few long ones: on a shared
	// machine the load moves within seconds, and the median of ten
	// round ratios holds steadier than that of five.
	return plan{rounds: 10, round: 3 * time.Second, hidden: 30 * time.Second, rideWarmup: 20 * time.Second, rideCap: 60 * time.Second}
}

// throughputConns are the wrk -c of the throughput rows: few and many
// connections per server core.
var throughputConns = []int{16, 64}

// The load settings of the tables.
const (
	wrkThreads   = 2
	wrkConns     = 64 // batches, and the maximum that sets the latency rate
	latencyConns = 64
	batchSize    = 1000

	hiddenDelay   = 100 * time.Millisecond
	hiddenRowStep = 100
	hiddenRate    = 2000
	hiddenConns   = 256

	rideRate  = 2000
	rideConns = 64
)

// requireLive skips the test unless -live.out names a directory.
func requireLive(t *testing.T) string {
	t.Helper()
	if *liveOut == "" {
		t.Skip("live measurement: run through cmd/report, or pass -args -live.out=DIR")
	}
	if err := os.MkdirAll(*liveOut, 0o755); err != nil {
		t.Fatal(err)
	}
	return *liveOut
}

func writeJSON(t *testing.T, dir, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLiveHTTP measures the real idgen binary on SQLite and on PostgreSQL
// against the floor binary, each store in a subtest: maximum requests/s
// with wrk, latency at half of idgen's maximum with the open-loop
// generator, and IDs/s of batches.
func TestLiveHTTP(t *testing.T) {
	out := requireLive(t)
	p := currentPlan()
	dir := t.TempDir()
	idgenBin := proctest.Binary(t, dir)
	floor := proctest.Start(t, buildFloor(t, dir), nil, "-addr", "127.0.0.1:0")

	res := HTTPResult{Quick: *liveQuick, LoadAvg: LoadAvg{Start: loadAvg()}, Rounds: p.rounds, Seconds: p.round.Seconds(),
		WrkThreads: wrkThreads, ThroughputConns: throughputConns, BatchConns: wrkConns, LatencyConns: latencyConns, Batch: batchSize}
	stores := []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "idgen.db") }},
		{"postgres", func(t *testing.T) string { return dbtest.Start(t, dbtest.Postgres).DSN }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			defer func() {
				if t.Skipped() {
					res.Skipped = append(res.Skipped, SkipReason{Store: st.name,
						Reason: "no Docker engine and no IDGEN_TEST_POSTGRES_DSN"})
				}
			}()
			idgen := proctest.Serve(t, idgenBin, []string{"IDGEN_STORE=" + st.dsn(t)}, "--access-log=false")
			res.Stores = append(res.Stores, measureHTTP(t, p, floor, idgen))
			res.Stores[len(res.Stores)-1].Store = st.name
		})
	}
	res.LoadAvg.End = loadAvg()
	writeJSON(t, out, HTTPFile, res)
}

func measureHTTP(t *testing.T, p plan, floor, idgen *proctest.Proc) HTTPStore {
	ctx := t.Context()
	const path = "/id/order"
	floorAddr, idgenAddr := floor.Addr(), idgen.Addr()
	wrk := func(proc *proctest.Proc, target, accept string, conns int, d time.Duration) WrkResult {
		t.Helper()
		r, err := Wrk{URL: "http://" + proc.Addr() + target, Threads: wrkThreads, Conns: conns, Duration: d, Accept: accept,
			PID: proc.PID()}.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Non2xx > 0 || r.SocketErrors > 0 {
			t.Logf("%s%s: %d non-2xx answers, %d socket errors", proc.Addr(), target, r.Non2xx, r.SocketErrors)
		}
		return r
	}
	// Warm up both: the tag's first segments, connections, caches.
	warm := min(p.round, 2*time.Second)
	wrk(floor, path, "", wrkConns, warm)
	wrk(idgen, path, "", wrkConns, warm)

	var s HTTPStore
	for _, conns := range throughputConns {
		tp := Throughput{Conns: conns}
		for r := range p.rounds {
			// ABBA: every other round idgen goes first, so that a load
			// rising or falling across the run weighs on both alike.
			if r%2 == 0 {
				tp.Floor = append(tp.Floor, wrk(floor, path, "", conns, p.round))
				tp.Idgen = append(tp.Idgen, wrk(idgen, path, "", conns, p.round))
			} else {
				tp.Idgen = append(tp.Idgen, wrk(idgen, path, "", conns, p.round))
				tp.Floor = append(tp.Floor, wrk(floor, path, "", conns, p.round))
			}
			t.Logf("c%d round %d: floor %.0f req/s %.1f µs CPU/req, idgen %.0f req/s %.1f µs CPU/req", conns, r+1,
				tp.Floor[r].RPS, tp.Floor[r].CPUPerRequest(), tp.Idgen[r].RPS, tp.Idgen[r].CPUPerRequest())
		}
		s.Throughput = append(s.Throughput, tp)
	}

	var rps []float64
	for _, tp := range s.Throughput {
		if tp.Conns == wrkConns {
			for _, w := range tp.Idgen {
				rps = append(rps, w.RPS)
			}
		}
	}
	s.LatencyRate = float64(int(Median(rps)/2/100) * 100)
	load := func(addr string) Latencies {
		t.Helper()
		run, err := OpenLoop{Addr: addr, Path: path, Rate: s.LatencyRate, Duration: p.round, Conns: latencyConns}.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return run.Summarise(s.LatencyRate)
	}
	for r := range p.rounds {
		s.FloorLatency = append(s.FloorLatency, load(floorAddr))
		s.IdgenLatency = append(s.IdgenLatency, load(idgenAddr))
		t.Logf("round %d at %.0f req/s: floor %+v; idgen %+v", r+1, s.LatencyRate, s.FloorLatency[r], s.IdgenLatency[r])
	}

	batch := path + "?count=" + strconv.Itoa(batchSize)
	wrk(idgen, batch, "", wrkConns, warm)
	for r := range p.rounds {
		s.BatchJSON = append(s.BatchJSON, wrk(idgen, batch, "", wrkConns, p.round))
		s.BatchText = append(s.BatchText, wrk(idgen, batch, "text/plain", wrkConns, p.round))
		t.Logf("round %d, batches of %d: JSON %.0f req/s, text %.0f req/s", r+1, batchSize, s.BatchJSON[r].RPS, s.BatchText[r].RPS)
	}
	return s
}

// serveInProcess serves alloc with the real server package on a loopback
// port until the test ends, and returns the address.
func serveInProcess(t *testing.T, alloc *segment.Allocator) string {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	h, err := server.New(server.Config{Segment: alloc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := server.NewHTTPServer(ln.Addr().String(), h)
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	})
	return ln.Addr().String()
}

func getOnce(t *testing.T, addr, path string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
}

// openPostgres opens and migrates the store at dsn for the test.
func openPostgres(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	ctx := t.Context()
	pg, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	if _, err := pg.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return pg
}

// TestLiveHidden puts PostgreSQL 100 ms away (SlowStore) and drives a
// steady open-loop load through the real server package, with the
// dynamic step and with a fixed one, counting the requests that had to
// wait for a load.
func TestLiveHidden(t *testing.T) {
	out := requireLive(t)
	p := currentPlan()
	pg := openPostgres(t, dbtest.Start(t, dbtest.Postgres).DSN)
	res := HiddenResult{Quick: *liveQuick, LoadAvg: LoadAvg{Start: loadAvg()}, DelayMS: float64(hiddenDelay) / float64(time.Millisecond),
		RowStep: hiddenRowStep, Rate: hiddenRate, Seconds: p.hidden.Seconds(), Conns: hiddenConns, Store: "postgres"}
	for _, dynamic := range []bool{true, false} {
		t.Run(fmt.Sprintf("dynamic=%v", dynamic), func(t *testing.T) {
			tag := segmenttest.UniqueTag("hidden")
			if err := pg.CreateTag(t.Context(), segment.Tag{Name: tag, MaxID: 1, Step: hiddenRowStep}); err != nil {
				t.Fatal(err)
			}
			rec := NewRecorder()
			alloc, err := segment.New(&SlowStore{Store: pg, Delay: hiddenDelay}, segment.Options{FixedStep: !dynamic, Observer: rec})
			if err != nil {
				t.Fatal(err)
			}
			defer alloc.Close()
			addr := serveInProcess(t, alloc)
			// The first segment: every caller waits for it, whatever the
			// step. It is loaded before the run and not counted.
			getOnce(t, addr, "/id/"+tag)

			rec.Reset(time.Now())
			run, err := OpenLoop{Addr: addr, Path: "/id/" + tag, Rate: hiddenRate, Duration: p.hidden,
				Conns: hiddenConns, Timeout: 10 * time.Second}.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			hr := HiddenRun{Dynamic: dynamic, Latencies: run.Summarise(hiddenRate), LastWaitS: -1}
			hr.Requests = hr.Latencies.OK + hr.Latencies.Failed
			for _, s := range run.Samples {
				if s.Done-s.Sent >= hiddenDelay/2 {
					hr.Slow++
				}
			}
			for _, w := range rec.Waits() {
				hr.Waits++
				if w > time.Second {
					hr.WaitsAfter1s++
				}
				hr.LastWaitS = w.Seconds()
			}
			for _, l := range rec.Loads() {
				if !l.Err {
					hr.Loads++
					hr.LastStep = l.Size
				}
			}
			t.Logf("%+v", hr)
			res.Runs = append(res.Runs, hr)
		})
	}
	res.LoadAvg.End = loadAvg()
	writeJSON(t, out, HiddenFile, res)
}

// probe records whether a fresh connection to the database succeeds,
// every 50 ms, so that the outage has measured ends rather than the
// times the container commands returned.
type probe struct {
	mu     sync.Mutex
	points []probePoint
}

type probePoint struct {
	at time.Time
	ok bool
}

func (p *probe) run(ctx context.Context, dsn string) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		conn, err := pgx.Connect(c, dsn)
		if err == nil {
			err = conn.Ping(c)
			_ = conn.Close(context.Background())
		}
		cancel()
		p.mu.Lock()
		p.points = append(p.points, probePoint{at: time.Now(), ok: err == nil})
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// first returns the time of the first probe after t with the given
// outcome, or the zero time.
func (p *probe) first(after time.Time, ok bool) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pt := range p.points {
		if pt.at.After(after) && pt.ok == ok {
			return pt.at
		}
	}
	return time.Time{}
}

// TestLiveRideThrough serves a steady load from PostgreSQL with the
// default options (row step 1000, dynamic step), stops the database,
// measures how long the buffers keep IDs flowing against what they held,
// then starts it again and measures how long service takes to return.
func TestLiveRideThrough(t *testing.T) {
	out := requireLive(t)
	if dbtest.External(dbtest.Postgres) {
		t.Skip("ride-through stops the database: it needs a container, not IDGEN_TEST_POSTGRES_DSN")
	}
	p := currentPlan()
	load := LoadAvg{Start: loadAvg()}
	db := dbtest.StartContainer(t, dbtest.Postgres)
	pg := openPostgres(t, db.DSN)
	alloc, err := segment.New(pg, segment.Options{AutoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Close()
	addr := serveInProcess(t, alloc)
	tag := segmenttest.UniqueTag("ride")
	getOnce(t, addr, "/id/"+tag)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var pr probe
	probeDone := make(chan struct{})
	go func() { defer close(probeDone); pr.run(ctx, db.DSN) }()
	defer func() { cancel(); <-probeDone }()

	// Failures and successes as they happen, in wall time.
	var lastFail, lastOK atomic.Int64 // UnixNano
	var oks atomic.Int64
	onSample := func(s Sample) {
		if s.Status == http.StatusOK {
			oks.Add(1)
			lastOK.Store(time.Now().UnixNano())
		} else {
			lastFail.Store(time.Now().UnixNano())
		}
	}
	total := p.rideWarmup + 3*p.rideCap
	runc := make(chan Run, 1)
	go func() {
		r, err := OpenLoop{Addr: addr, Path: "/id/" + tag, Rate: rideRate, Duration: total,
			Conns: rideConns, Timeout: 5 * time.Second, OnSample: onSample}.Run(ctx)
		if err != nil {
			t.Error(err)
		}
		runc <- r
	}()

	// The warm-up is the answers the steady rate gives in rideWarmup,
	// however long the machine takes to give them.
	warm := int64(rideRate * p.rideWarmup.Seconds())
	if !testtime.Until(total, 20*time.Millisecond, func() bool { return oks.Load() >= warm }) {
		t.Fatalf("%d answers of the %d of the warm-up", oks.Load(), warm)
	}
	seq, err := alloc.Sequence(tag)
	if err != nil {
		t.Fatal(err)
	}
	st := seq.Stats()
	buffered := st.Current.End - st.Current.Pos
	if st.Next != nil {
		buffered += st.Next.End - st.Next.Pos
	}
	stopCalled := time.Now()
	db.Stop(t)
	stopReturned := time.Now()

	// Wait for the buffers to run dry, up to a bound, then keep the
	// database down a little longer so that the outage is seen failing.
	predicted := time.Duration(float64(buffered) / rideRate * float64(time.Second))
	bound := min(max(predicted*3/2+10*time.Second, 15*time.Second), p.rideCap)
	capped := !testtime.Until(bound-time.Since(stopCalled), 20*time.Millisecond, func() bool { return lastFail.Load() > stopCalled.UnixNano() })
	time.Sleep(2 * time.Second) // the outage itself: a fault lasts a duration, and its failures are the result
	restartCalled := time.Now()
	db.Restart(t)
	restartReturned := time.Now()
	// Recovered: answers 200 again, then a clean stretch.
	testtime.Until(p.rideCap, 20*time.Millisecond, func() bool {
		return lastOK.Load() > restartCalled.UnixNano() && lastOK.Load() > lastFail.Load() &&
			time.Since(time.Unix(0, lastFail.Load())) > 3*time.Second
	})
	cancel()
	run := <-runc
	<-probeDone

	start := run.Start
	sec := func(at time.Time) float64 {
		if at.IsZero() {
			return -1
		}
		return at.Sub(start).Seconds()
	}
	load.End = loadAvg()
	res := RideThroughResult{Quick: *liveQuick, LoadAvg: load, Store: "postgres", Rate: rideRate, WarmupS: p.rideWarmup.Seconds(),
		StepAtStop: st.Step, BufferedAtStop: buffered, LoadingAtStop: st.Loading, Capped: capped,
		StopCalledS: sec(stopCalled), StopReturnedS: sec(stopReturned),
		RestartCalledS: sec(restartCalled), Requests: len(run.Samples),
		FirstFailureS: -1, RideThroughS: -1, FirstSuccessS: -1, LastFailureS: -1, RecoveryS: -1}
	down := pr.first(stopCalled, false)
	if down.IsZero() {
		down = stopReturned
	}
	up := pr.first(restartCalled, true)
	if up.IsZero() {
		up = restartReturned
	}
	res.DBDownS, res.DBUpS = sec(down), sec(up)

	// Served rate over the 5 s before the stop.
	stopAt, downAt := stopCalled.Sub(start), down.Sub(start)
	var okBefore int
	for _, s := range run.Samples {
		if s.Status == http.StatusOK && s.Done > stopAt-5*time.Second && s.Done <= stopAt {
			okBefore++
		}
	}
	res.ServedRate = float64(okBefore) / 5
	if res.ServedRate > 0 {
		res.PredictedS = float64(buffered) / res.ServedRate
	}

	var firstFail, lastFailure time.Duration = -1, -1
	for _, s := range run.Samples {
		if s.Status != http.StatusOK {
			res.Failed++
			if s.Done > stopAt && (firstFail < 0 || s.Done < firstFail) {
				firstFail = s.Done
			}
			lastFailure = max(lastFailure, s.Done)
		}
	}
	if firstFail >= 0 {
		res.FirstFailureS = firstFail.Seconds()
		res.RideThroughS = (firstFail - downAt).Seconds()
		var firstOK time.Duration = -1
		for _, s := range run.Samples {
			if s.Status == http.StatusOK && s.Done > downAt && s.Done < firstFail {
				res.IDsDuringOutage++
			}
			if s.Status == http.StatusOK && s.Done > firstFail && (firstOK < 0 || s.Done < firstOK) {
				firstOK = s.Done
			}
		}
		if firstOK >= 0 {
			res.FirstSuccessS = firstOK.Seconds()
			res.RecoveryS = (firstOK - up.Sub(start)).Seconds()
		}
		res.LastFailureS = lastFailure.Seconds()
	} else {
		for _, s := range run.Samples {
			if s.Status == http.StatusOK && s.Done > downAt {
				res.IDsDuringOutage++
			}
		}
	}
	t.Logf("%+v", res)
	writeJSON(t, out, RideThroughFile, res)
}

// loadAvg returns the 1-minute load average, or -1 where /proc/loadavg
// cannot be read.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return -1
	}
	return v
}
