package reliability_test

import (
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/dbtest"
)

// TestFaults injects faults into real `idgen serve` processes on
// PostgreSQL under load: repeated kill -9, a database restart and a
// frozen database, a persisted clock floor ahead of the clock, and
// malformed requests. IDGEN_FAULT_PROFILE picks how long and how often.
func TestFaults(t *testing.T) {
	prof := faultProfile(t)
	results.Lock()
	results.profile = prof.name
	results.Unlock()
	t.Logf("fault profile %s: %+v", prof.name, prof)
	t.Run("kill", func(t *testing.T) { faultKills(t, prof) })
	t.Run("database", func(t *testing.T) { faultDatabase(t, prof) })
	t.Run("clock", func(t *testing.T) { faultClock(t, prof) })
	t.Run("input", func(t *testing.T) { faultInput(t, prof) })
	logTable(t, "TestFaults")
}

// Three instances under load; at random moments one of them is killed
// with SIGKILL and, after a random pause, started again, for the whole
// load time. Every ID stays unique, each process's IDs increase, and no
// worker ID is claimed while a killed holder's lease is live.
func faultKills(t *testing.T, prof profile) {
	srv := dbtest.StartContainer(t, dbtest.Postgres)
	f := newFleet(t, srv.DSN, 3, leaseTTL, "--default-step", "100")
	for slot := range f.slots {
		f.start(slot)
	}
	f.checkDistinctWorkers("at start")
	sd := seed(t)
	rng := rand.New(rand.NewPCG(sd, 1))
	between := func(r [2]time.Duration) time.Duration {
		return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])+1))
	}
	tagA, tagB := segmenttest.UniqueTag("kill-a"), segmenttest.UniqueTag("kill-b")
	l := startLoad(f, sd, map[string]int{"steady": 6}, map[string]mix{"steady": steadyMix(tagA, tagB)})
	defer l.cancel()
	end := l.start.Add(prof.killLoad)

	kills, takeovers := 0, 0
	var downtimes []time.Duration
	for {
		gap := prof.killGap[0] + rng.Int64N(prof.killGap[1]-prof.killGap[0]+1)
		down := between(prof.restartDelay)
		l.answers(gap)
		// Leave time for the restart to be under load too.
		if time.Now().Add(down + 3*time.Second).After(end) {
			break
		}
		slot := rng.IntN(len(f.slots))
		dead := f.kill(slot)
		kills++
		time.Sleep(down) // the fault: how long the process stays dead decides whether its lease lapses
		n := f.start(slot)
		downtimes = append(downtimes, n.ready.Sub(dead.killed))
		how := "a free worker ID"
		for _, d := range f.instances() {
			if !d.killed.IsZero() && d.held && d.final.worker == n.worker() {
				how = fmt.Sprintf("the expired worker ID of killed instance #%d", d.seq)
			}
		}
		if how != "a free worker ID" {
			takeovers++
		}
		t.Logf("kill %d at +%v: %s; down %v; restarted as %s on %s",
			kills, dead.killed.Sub(l.start).Round(time.Millisecond), dead, n.ready.Sub(dead.killed).Round(time.Millisecond), n, how)
		f.checkDistinctWorkers(fmt.Sprintf("after kill %d", kills))
	}
	sleepUntil(end)
	l.stop()

	s := l.summary()
	segDup, sfDup := s.duplicates()
	f.refreshClaims()
	runs := s.runs()
	workers := checkRuns(t, runs)
	checkLeases(t, f, runs)
	checkSummary(t, s, killAllowed)
	if segDup != 0 || sfDup != 0 {
		t.Errorf("duplicates: %d segment, %d snowflake; want 0", segDup, sfDup)
	}
	if kills == 0 {
		t.Errorf("no kill happened in %v", prof.killLoad)
	}
	used := map[int64]bool{}
	for _, ws := range workers {
		for _, w := range ws {
			used[w] = true
		}
	}
	t.Logf("%v of load, %d requests, %d kills (restart after %v on average), %d processes, worker IDs used %v; IDs: %d segment, %d snowflake; duplicates %d/%d; errors %s; longest stall %v",
		l.elapsed.Round(time.Millisecond), s.requests, kills, mean(downtimes).Round(time.Millisecond), len(f.instances()),
		slices.Sorted(maps.Keys(used)), s.segment, s.snowflake, segDup, sfDup, formatErrors(s.errors), s.stall.Round(time.Millisecond))
	f.stopAll()
	record(t, result{test: "TestFaults", scenario: "kill", load: l.elapsed,
		faults:  fmt.Sprintf("%d × kill -9 at random moments (3 instances, each restarted)", kills),
		segment: s.segment, snowflake: s.snowflake, duplicates: segDup + sfDup, errors: s.errors, stall: s.stall,
		notes: []string{fmt.Sprintf("%d processes in all; %d restarts took over the worker ID of a killed process after its lease expired; worker IDs used %v; kill to first answer of the new process %v on average",
			len(f.instances()), takeovers, slices.Sorted(maps.Keys(used)), mean(downtimes).Round(time.Millisecond))}})
}

// Two instances under load while the database is stopped and started
// again, then frozen with docker pause. Requests must fail fast with 503
// (the segment wait is 3 s) rather than hang; goroutines must stay
// bounded and come back to where they were; the service must recover by
// itself, without a restart.
func faultDatabase(t *testing.T, prof profile) {
	srv := dbtest.StartContainer(t, dbtest.Postgres)
	f := newFleet(t, srv.DSN, 2, leaseTTL, "--default-step", "100")
	for slot := range f.slots {
		f.start(slot)
	}
	sd := seed(t)
	tagA, tagB := segmenttest.UniqueTag("db-a"), segmenttest.UniqueTag("db-b")
	l := startLoad(f, sd, map[string]int{"steady": 6, "fresh": 2},
		map[string]mix{"steady": steadyMix(tagA, tagB), "fresh": freshMix(segmenttest.UniqueTag("fresh"))})
	defer l.cancel()

	// The sampler reads /metrics of each instance twice a second, and the
	// prober /readyz, each labelled with the phase of the test.
	var phase atomic.Value
	phase.Store("baseline")
	var (
		smu      sync.Mutex
		samples  []runtimeSample
		scrapeEr []string
		ready    = map[string]map[int]int{}   // phase -> status -> count
		readyMax = map[string]time.Duration{} // phase -> slowest /readyz
	)
	stopSampler := make(chan struct{})
	stopSampling := sync.OnceFunc(func() { close(stopSampler) })
	defer stopSampling() // also when the test fails midway
	var swg sync.WaitGroup
	every := func(d time.Duration, fn func(inst *instance, phase string)) {
		swg.Go(func() {
			tick := time.NewTicker(d)
			defer tick.Stop()
			for {
				select {
				case <-stopSampler:
					return
				case <-tick.C:
				}
				for _, inst := range f.live() {
					fn(inst, phase.Load().(string))
				}
			}
		})
	}
	every(500*time.Millisecond, func(inst *instance, ph string) {
		s, err := f.sample(inst, ph)
		smu.Lock()
		defer smu.Unlock()
		if err != nil {
			scrapeEr = append(scrapeEr, fmt.Sprintf("%s: /metrics during %s: %v", inst, ph, err))
			return
		}
		samples = append(samples, s)
	})
	every(500*time.Millisecond, func(inst *instance, ph string) {
		t0 := time.Now()
		status, _, _, err := f.get(inst, "/readyz")
		d := time.Since(t0)
		smu.Lock()
		defer smu.Unlock()
		if ready[ph] == nil {
			ready[ph] = map[int]int{}
		}
		if err != nil {
			status = -1
		}
		ready[ph][status]++
		readyMax[ph] = max(readyMax[ph], d)
	})

	l.answers(10_000) // the baseline
	var restarts, pauses int
	var recoveries, sideNotes []string
	for i := range prof.outages {
		phase.Store("database stopped")
		srv.Stop(t)
		restarts++
		time.Sleep(prof.dbDown) // the fault: an outage lasts a while, and the load meets it
		srv.Restart(t)
		phase.Store("recovering")
		recoveries = append(recoveries, fmt.Sprintf("restart %d: %v", i+1, waitRecovered(t, f).Round(time.Millisecond)))
		phase.Store("between")
		l.answers(6_000)

		phase.Store("database paused")
		srv.Pause(t)
		pauses++
		side := sideProbes(f, time.Second)
		time.Sleep(prof.pause) // the fault: a freeze lasts a while, and the load meets it
		srv.Unpause(t)
		sideNotes = append(sideNotes, fmt.Sprintf("pause %d: %s", i+1, strings.Join(side(), "; ")))
		phase.Store("recovering")
		recoveries = append(recoveries, fmt.Sprintf("pause %d: %v", i+1, waitRecovered(t, f).Round(time.Millisecond)))
		phase.Store("after")
		l.answers(10_000)
	}
	l.stop()
	stopSampling()
	swg.Wait()

	freshTags := 0
	for _, c := range l.clients {
		if c.kind == "fresh" {
			freshTags += c.sent
		}
	}
	s := l.summary()
	segDup, sfDup := s.duplicates()
	f.refreshClaims()
	runs := s.runs()
	workers := checkRuns(t, runs)
	checkLeases(t, f, runs)
	checkSummary(t, s, func(key string) bool {
		// While the store is away, segment requests that need it get
		// 503 unavailable and snowflake ones, once the lease deadline
		// has passed, 503 no_worker_lease.
		return key == "503 unavailable" || key == "503 no_worker_lease"
	})
	if segDup != 0 || sfDup != 0 {
		t.Errorf("duplicates: %d segment, %d snowflake; want 0", segDup, sfDup)
	}
	// 503 within a bounded time: the segment wait is 3 s; allow as much
	// again for a starved machine. A hung request would reach the
	// client timeout instead.
	if s.maxFailed > 10*time.Second {
		t.Errorf("slowest failed request took %v; want a 503 within about 3 s", s.maxFailed)
	}
	if len(f.instances()) != len(f.slots) {
		t.Errorf("%d processes were started for %d slots: the service needed a restart", len(f.instances()), len(f.slots))
	}
	for _, e := range scrapeEr {
		t.Errorf("%s", e)
	}

	// Goroutines and memory per instance, by phase.
	var report []string
	for _, inst := range f.live() {
		by := map[string][]runtimeSample{}
		for _, s := range samples {
			if s.slot == inst.slot {
				by[s.phase] = append(by[s.phase], s)
			}
		}
		base, after := by["baseline"], by["after"]
		if len(base) == 0 || len(after) < 3 {
			t.Errorf("%s: too few samples (%d baseline, %d after)", inst, len(base), len(after))
			continue
		}
		baseG, baseRSS := maxOf(base, goroutinesOf), maxOf(base, rssOf)
		var during []runtimeSample
		for _, ph := range []string{"database stopped", "recovering", "between", "database paused"} {
			during = append(during, by[ph]...)
		}
		peakG, peakRSS := maxOf(during, goroutinesOf), maxOf(during, rssOf)
		settled := after[len(after)-3:]
		afterG, afterRSS := minOf(settled, goroutinesOf), minOf(settled, rssOf)
		report = append(report, fmt.Sprintf("instance %d: goroutines %.0f baseline, %.0f peak during the outages, %.0f after; RSS %.1f MiB baseline, %.1f MiB peak, %.1f MiB after",
			inst.slot, baseG, peakG, afterG, baseRSS/mib, peakRSS/mib, afterRSS/mib))
		if peakG > baseG+200 {
			t.Errorf("%s: %.0f goroutines during the outages against %.0f before: requests pile up", inst, peakG, baseG)
		}
		if afterG > baseG+50 {
			t.Errorf("%s: %.0f goroutines after recovery against %.0f before: goroutines leaked", inst, afterG, baseG)
		}
		if peakRSS > baseRSS+256*mib {
			t.Errorf("%s: RSS %.1f MiB during the outages against %.1f MiB before", inst, peakRSS/mib, baseRSS/mib)
		}
	}
	var readyz []string
	for _, ph := range []string{"baseline", "database stopped", "recovering", "between", "database paused", "after"} {
		if ready[ph] != nil {
			readyz = append(readyz, fmt.Sprintf("%s %v (slowest %v)", ph, ready[ph], readyMax[ph].Round(time.Millisecond)))
		}
	}
	t.Logf("/readyz answers by phase, status -> count (-1: no answer): %s", strings.Join(readyz, "; "))
	if s.errors["503 unavailable"] == 0 {
		t.Errorf("no request failed with 503 unavailable: the outages did not reach the service")
	}
	used := map[int64]bool{}
	for _, ws := range workers {
		for _, w := range ws {
			used[w] = true
		}
	}
	t.Logf("%v of load, %d requests; %d restarts (down %v) and %d pauses (%v) of the database; recovered after %s; worker IDs used %v; IDs: %d segment, %d snowflake; duplicates %d/%d; errors %s; slowest failure %v, slowest answer %v; longest stall %v\n%s",
		l.elapsed.Round(time.Millisecond), s.requests, restarts, prof.dbDown, pauses, prof.pause, strings.Join(recoveries, ", "),
		slices.Sorted(maps.Keys(used)), s.segment, s.snowflake, segDup, sfDup, formatErrors(s.errors),
		s.maxFailed.Round(time.Millisecond), s.maxLatency.Round(time.Millisecond), s.stall.Round(time.Millisecond), strings.Join(report, "\n"))
	f.stopAll()
	record(t, result{test: "TestFaults", scenario: "database", load: l.elapsed,
		faults:  fmt.Sprintf("%d × database restart (down %v), %d × docker pause (%v); 2 instances", restarts, prof.dbDown, pauses, prof.pause),
		segment: s.segment, snowflake: s.snowflake, duplicates: segDup + sfDup, errors: s.errors, stall: s.stall,
		notes: append(report,
			fmt.Sprintf("slowest failed request %v (the segment wait is 3 s), slowest answer %v; recovered without a restart after %s",
				s.maxFailed.Round(time.Millisecond), s.maxLatency.Round(time.Millisecond), strings.Join(recoveries, ", ")),
			fmt.Sprintf("the fresh-tag clients asked for %d new tags; each stays in memory (its allocator sequence and Prometheus series), which accounts for RSS growing over the run", freshTags),
			"/readyz by phase, status → count: "+strings.Join(readyz, "; "),
			"routes beside the ID routes during the pauses (reported, not asserted): "+strings.Join(sideNotes, " — "))})
}

// sideProbes sends, after delay, one request to each route beside the
// ID routes that touches the store, on every live instance, and returns
// a func that waits for the answers and describes them. The client waits
// up to a minute, so a request that hangs until the database returns
// shows as such.
func sideProbes(f *fleet, delay time.Duration) func() []string {
	hc := &http.Client{Timeout: time.Minute}
	type answer struct {
		route, result string
		took          time.Duration
	}
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	for _, inst := range f.live() {
		for _, route := range []struct{ name, method, path string }{
			{"POST /segment/{tag}/range", http.MethodPost, "/segment/" + segmenttest.UniqueTag("side") + "/range?size=10"},
			{"GET /admin/tags", http.MethodGet, "/admin/tags"},
		} {
			wg.Go(func() {
				time.Sleep(delay) // into the pause: what a route does a while after the database froze
				req, _ := http.NewRequest(route.method, inst.url+route.path, nil)
				req.Header.Set("Authorization", "Bearer "+adminToken)
				t0 := time.Now()
				resp, err := hc.Do(req)
				a := answer{route: route.name, took: time.Since(t0)}
				if err != nil {
					a.result = transportKey(err)
				} else {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					a.result = statusKey(resp.StatusCode, b)
					if resp.StatusCode == http.StatusOK {
						a.result = "200"
					}
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			})
		}
	}
	return func() []string {
		wg.Wait()
		var out []string
		for _, route := range []string{"POST /segment/{tag}/range", "GET /admin/tags"} {
			var results []string
			var slowest time.Duration
			fastest := time.Duration(math.MaxInt64)
			for _, a := range answers {
				if a.route == route {
					if !slices.Contains(results, a.result) {
						results = append(results, a.result)
					}
					slowest, fastest = max(slowest, a.took), min(fastest, a.took)
				}
			}
			out = append(out, fmt.Sprintf("%s answered %s after %v to %v, %v after the pause began",
				route, strings.Join(results, " or "), fastest.Round(100*time.Millisecond), slowest.Round(100*time.Millisecond), delay))
		}
		return out
	}
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

const mib = 1 << 20

func goroutinesOf(s runtimeSample) float64 { return s.goroutines }
func rssOf(s runtimeSample) float64        { return s.rss }

func maxOf(ss []runtimeSample, f func(runtimeSample) float64) float64 {
	var m float64
	for _, s := range ss {
		m = max(m, f(s))
	}
	return m
}

func minOf(ss []runtimeSample, f func(runtimeSample) float64) float64 {
	m := f(ss[0])
	for _, s := range ss[1:] {
		m = min(m, f(s))
	}
	return m
}

// waitRecovered polls every live instance until it issues segment IDs of
// a new tag (which needs the database), snowflake IDs and is ready, and
// returns how long that took. It fails the test after a minute.
func waitRecovered(t *testing.T, f *fleet) time.Duration {
	t.Helper()
	t0 := time.Now()
	deadline := t0.Add(time.Minute)
	for _, inst := range f.live() {
		var s1, s2, s3 int
		var e1, e2, e3 error
		if !testtime.Until(time.Until(deadline), 200*time.Millisecond, func() bool {
			tag := segmenttest.UniqueTag("recover")
			s1, _, _, e1 = f.get(inst, "/segment/"+tag)
			s2, _, _, e2 = f.get(inst, "/snowflake/"+tag)
			s3, _, _, e3 = f.get(inst, "/readyz")
			return e1 == nil && e2 == nil && e3 == nil && s1 == 200 && s2 == 200 && s3 == 200
		}) {
			t.Fatalf("%s did not recover within a minute: segment %d %v, snowflake %d %v, readyz %d %v\n%s",
				inst, s1, e1, s2, e2, s3, e3, tail(inst.p.Log(), 30))
		}
	}
	return time.Since(t0)
}
