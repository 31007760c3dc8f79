package reliability_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/store/dbtest"
)

// maxBackward is the snowflake generator's default MaxBackward, which
// serve uses: a clock up to this far behind the floor is waited out.
const maxBackward = 5 * time.Millisecond

// A Go binary reads the time without libc, so the clock of a real
// process cannot be set back from outside. The same situation arises
// when a worker's persisted last_timestamp is ahead of the clock — as
// after a restart on a machine whose clock was stepped back — so that is
// what this scenario creates: it stops the only instance gracefully (the
// lease is released, last_timestamp kept), moves last_timestamp ahead of
// now by each gap, and starts the instance again, which reclaims the
// same worker ID with that floor. A gap within MaxBackward, or one that
// has passed by the time the first request arrives, must cost nothing but
// a short wait; a larger one must be refused with 503
// worker_floor_ahead (the floor came from the store, so the clock is not
// blamed), and /readyz must say 503, until the clock has
// caught up, after which the instance recovers on its own. No ID may
// repeat across any of this.
func faultClock(t *testing.T, prof profile) {
	srv := dbtest.StartContainer(t, dbtest.Postgres)
	f := newFleet(t, srv.DSN, 1, leaseTTL, "--mode", "snowflake")
	inst := f.start(0)
	worker := inst.worker()
	ctx := context.Background()

	var all []int64 // every snowflake ID, in the order received
	take := func(inst *instance, when string) []int64 {
		t.Helper()
		ids, status, code, _, err := fetchIDs(f, inst, "/id/clock?count=500")
		if err != nil || status != http.StatusOK {
			t.Fatalf("%s: GET /id/clock: %d %s %v", when, status, code, err)
		}
		all = append(all, ids...)
		return ids
	}
	for range 4 {
		take(inst, "before any gap")
	}

	var refusals, gaps int
	var notes []string
	errs := map[string]int{}
	var longest time.Duration
	for _, gap := range prof.clockGaps {
		gaps++
		lastMs := msOf(all[len(all)-1])
		if err := inst.p.Stop(20 * time.Second); err != nil {
			t.Fatalf("graceful stop of %s: %v\n%s", inst, err, tail(inst.p.Log(), 20))
		}
		row, err := f.db.leaseRow(ctx, worker)
		if err != nil {
			t.Fatal(err)
		}
		if row.owner != "" || row.lastTS < lastMs {
			t.Errorf("after a graceful stop worker %d's row is %+v; want it released with last_timestamp at or after %d, the last ID's", worker, row, lastMs)
		}

		floor := time.Now().UnixMilli() + gap.Milliseconds()
		if _, err := f.db.db.ExecContext(ctx, f.db.bind(`UPDATE worker_node SET last_timestamp = ? WHERE worker_id = ?`), floor, worker); err != nil {
			t.Fatal(err)
		}
		set := time.Now()
		inst = f.start(0)
		c := inst.claims[0]
		if c.worker != worker || c.floor != floor {
			t.Fatalf("the restarted instance claimed worker %d with floor %d; want worker %d with the floor %d just written", c.worker, c.floor, worker, floor)
		}
		startup := inst.ready.Sub(set)

		// Ask until the instance issues, for at most 15 s past the floor.
		deadline := laterOf(time.Now().Add(15*time.Second), time.UnixMilli(floor).Add(15*time.Second))
		var first []int64
		refused := 0
		if !testtime.Until(time.Until(deadline), 100*time.Millisecond, func() bool {
			sent := time.Now()
			ids, status, code, retryAfter, err := fetchIDs(f, inst, "/id/clock?count=500")
			switch {
			case err != nil:
				t.Fatalf("gap %v: GET /id/clock: %v", gap, err)
			case status == http.StatusOK:
				first = ids
				all = append(all, ids...)
			case status == http.StatusServiceUnavailable && code == "worker_floor_ahead":
				refused++
				errs["503 worker_floor_ahead"]++
				// A refusal is only right while the clock is more than
				// MaxBackward behind the floor; the server read its
				// clock after the request was sent.
				if sent.UnixMilli() >= floor-maxBackward.Milliseconds()+1 {
					t.Errorf("gap %v: refused at %d ms, less than %v before the floor %d ms", gap, sent.UnixMilli(), maxBackward, floor)
				}
				if !retryAfter {
					t.Errorf("gap %v: 503 worker_floor_ahead without Retry-After", gap)
				}
				if time.Until(time.UnixMilli(floor)) > 200*time.Millisecond {
					if st, _, _, err := f.get(inst, "/readyz"); err != nil || st != http.StatusServiceUnavailable {
						t.Errorf("gap %v: /readyz answered %d (%v) while IDs were refused; want 503", gap, st, err)
					}
					// The other strategy does not depend on the clock floor.
					if st, body, _, err := f.get(inst, "/segment/clock-seg"); err != nil || st != http.StatusOK {
						t.Errorf("gap %v: /segment answered %d %s (%v) while snowflake IDs were refused; want 200", gap, st, body, err)
					}
				}
			default:
				t.Fatalf("gap %v: GET /id/clock: %d %s; want 200 or 503 worker_floor_ahead", gap, status, code)
			}
			return first != nil
		}) {
			t.Fatalf("gap %v: still refused %v after the floor", gap, time.Since(time.UnixMilli(floor)))
		}
		waited := time.Since(set)
		longest = max(longest, waited)
		refusals += refused
		if got := msOf(first[0]); got <= floor {
			t.Errorf("gap %v: first ID after the restart is stamped %d ms, not after the floor %d ms", gap, got, floor)
		}
		if st, _, _, err := f.get(inst, "/readyz"); err != nil || st != http.StatusOK {
			t.Errorf("gap %v: /readyz answered %d (%v) after recovery; want 200", gap, st, err)
		}
		if refused > 0 {
			// The floor came from the store, not from this machine's
			// clock: the clock alarm (IdgenClockBackwards) must not fire.
			if n, err := metricValue(f, inst, "idgen_clock_backward_events_total"); err != nil || n != 0 {
				t.Errorf("gap %v: idgen_clock_backward_events_total is %v (%v) after %d refusals for a floor; want 0", gap, n, err, refused)
			}
		}
		var note string
		switch {
		case refused == 0 && startup >= gap:
			note = fmt.Sprintf("gap %v: the floor passed during the %v restart; first request served", gap, startup.Round(time.Millisecond))
		case refused == 0:
			note = fmt.Sprintf("gap %v: first request served after a wait within MaxBackward (restart took %v)", gap, startup.Round(time.Millisecond))
		default:
			note = fmt.Sprintf("gap %v: refused %d× with 503 worker_floor_ahead, /readyz 503, then served %v after the floor was set (restart took %v)",
				gap, refused, waited.Round(time.Millisecond), startup.Round(time.Millisecond))
		}
		notes = append(notes, note)
		t.Log(note)
		if gap > time.Second && refused == 0 {
			t.Errorf("gap %v: no request was refused; want 503 worker_floor_ahead until the clock reaches the floor", gap)
		}
		take(inst, fmt.Sprintf("after gap %v", gap))
	}

	for i := 1; i < len(all); i++ {
		if all[i] <= all[i-1] {
			t.Errorf("snowflake ID %d after %d across restarts of worker %d", all[i], all[i-1], worker)
			break
		}
	}
	dups := duplicates(append([]int64(nil), all...))
	if dups != 0 {
		t.Errorf("%d duplicate snowflake IDs; want 0", dups)
	}
	f.stopAll()
	var gapNames []string
	for _, g := range prof.clockGaps {
		gapNames = append(gapNames, g.String())
	}
	t.Logf("%d snowflake IDs on worker %d across %d restarts, %d duplicates, %d refusals\n%s", len(all), worker, gaps, dups, refusals, strings.Join(notes, "\n"))
	record(t, result{test: "TestFaults", scenario: "clock", load: 0,
		faults:    fmt.Sprintf("persisted last_timestamp moved ahead of the clock by %s, each across a restart", strings.Join(gapNames, ", ")),
		snowflake: len(all), duplicates: dups, errors: errs, stall: longest, notes: notes})
}

// fetchIDs asks for text/plain IDs and returns them, or the status and
// error code.
func fetchIDs(f *fleet, inst *instance, path string) (ids []int64, status int, code string, retryAfter bool, err error) {
	req, err := http.NewRequest(http.MethodGet, inst.url+path, nil)
	if err != nil {
		return nil, 0, "", false, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := f.ctl.Do(req)
	if err != nil {
		return nil, 0, "", false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, "", false, err
	}
	if resp.StatusCode != http.StatusOK {
		_, code, _ = strings.Cut(statusKey(resp.StatusCode, b), " ")
		return nil, resp.StatusCode, code, resp.Header.Get("Retry-After") != "", nil
	}
	ids, err = parseIDs(b)
	return ids, resp.StatusCode, "", false, err
}

// metricValue reads one unlabelled sample from /metrics.
func metricValue(f *fleet, inst *instance, name string) (float64, error) {
	status, body, _, err := f.get(inst, "/metrics")
	if err != nil || status != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %d %v", status, err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("/metrics has no %s", name)
}

// msOf is the Unix ms a snowflake ID is stamped with.
func msOf(id int64) int64 {
	p, _ := snowflake.Decode(id)
	return p.Time.UnixMilli()
}
