package reliability_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/clustertest"
	"github.com/idgen/idgen/segment/segmenttest"
)

// TestReplicas runs idgen on an asynchronous primary and replica, with
// no failover manager: what an operator does by hand, or what a manager
// that promotes the most advanced replica does when that replica is
// behind. Two processes run under load; the replica stops receiving;
// they keep reserving and renewing on the primary alone; the primary is
// killed with SIGKILL and the stale replica promoted; the two processes
// go on, and a third starts after the failover. Every ID of both modes is
// collected: none may be issued twice, although the new primary has lost
// every reservation and lease renewal of the last seconds.
func TestReplicas(t *testing.T) {
	setClusterProfile(clusterProf(t).name)
	binary(t) // built before the clocks of the scenarios start
	// The scenarios run two at a time, as TestRestore's.
	t.Cleanup(func() { logClusterTable(t, "TestReplicas") })
	postgres := func(scenario, how string, noSnowflake bool) func(t *testing.T) {
		return func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			p := clustertest.StartPGReplica(t)
			asyncFailover(t, began, asyncPair{
				scenario: scenario, dsn: p.DSN, password: p.Password, noSnowflake: noSnowflake,
				stop: p.StopReplica,
				kill: func() (string, error) {
					lost, err := p.KillPrimary()
					return fmt.Sprintf("%d bytes of WAL", lost), err
				},
				promote: p.Promote, logs: func() string { return p.Logs(20) }, how: how,
			})
		}
	}
	t.Run("postgres", postgres("postgres",
		"replica shut down cleanly (SIGINT, the fast shutdown), then kill -9 of the primary, then the replica started and promoted (pg_promote)", false))
	// A fleet without worker leases (--snowflake=false, beside Leaf's
	// servers as docs/migrating.md has it): each instance holds a
	// presence lease, so that the fence counts it and waits for its
	// witness raise.
	t.Run("postgres-no-snowflake", postgres("postgres-no-snowflake", "as postgres, every instance --mode segment --snowflake=false", true))
	t.Run("mariadb", func(t *testing.T) {
		t.Parallel()
		began := time.Now()
		r := clustertest.StartMariaDBReplica(t)
		asyncFailover(t, began, asyncPair{
			scenario: "mariadb", dsn: r.DSN(""), password: r.Password,
			stop: r.StopReplicaIO,
			kill: func() (string, error) {
				primary, replica, err := r.KillPrimary()
				return fmt.Sprintf("the transactions between GTID %s (replica) and %s (primary)", replica, primary), err
			},
			promote: r.Promote, logs: func() string { return r.Logs(20) },
			how: "replica's IO thread stopped, then kill -9 of the primary, then the replica promoted (STOP SLAVE; RESET SLAVE ALL; read_only OFF); the DSN's next host is the replica",
		})
	})
}

// asyncPair is a primary with an asynchronous replica, as asyncFailover
// drives it.
type asyncPair struct {
	scenario string
	dsn      string // the primary, then the replica
	password string
	stop     func() error           // the replica stops receiving
	kill     func() (string, error) // kill -9 of the primary; what the replica lacked, in words
	promote  func() error
	logs     func() string
	how      string // the faults, in words
	// noSnowflake runs every instance with --mode segment
	// --snowflake=false: no worker leases, presence leases instead.
	noSnowflake bool
}

// The steps of asyncFailover: every instance reserves at most
// replicaCap IDs at once of a tag it creates (--max-step, --max-range),
// and the two steady tags have a row step of replicaRowStep, ten times
// that: a reservation of them takes the row's step, above the fencer's
// own cap, as docs/deploy.md's step-sizing advice makes it.
const (
	replicaCap     = 100
	replicaRowStep = 10 * replicaCap
)

const (
	// replicaSettle is the load before the replica stops, in answers
	// (load.answers), as the cluster tests' settle.
	replicaSettle = 6_000
	// replicaBehind is the load while the replica is stopped: a duration,
	// longer than leaseTTL, so that on the promoted replica every lease
	// the processes renewed since looks expired, while they still stamp
	// IDs under it.
	replicaBehind = 4 * time.Second
	// afterFailover is the load after the promotion, with the third
	// process, in answers.
	afterFailover = 12_000
)

// replicaFleet starts the first two of the three processes of a
// failover to a replica on dsn (the third is started after it), creates
// the two steady tags and returns them with the steady mix.
func replicaFleet(t *testing.T, dsn string, noSnowflake bool) (*fleet, mix, []string) {
	t.Helper()
	// Small segments make reservations frequent, so that many are lost
	// with the primary.
	cp := strconv.Itoa(replicaCap)
	f := newFleet(t, dsn, 3, leaseTTL, "--default-step", cp, "--max-step", cp, "--max-range", cp)
	f.env = nil // --store on the command line: the multi-host form must parse there
	f.slotArgs = [][]string{
		{"--store", dsn, "--mode", "segment"},
		{"--store", dsn, "--mode", "snowflake"},
		{"--store", dsn, "--mode", "segment"}, // started after the failover
	}
	tags := []string{segmenttest.UniqueTag("rep-a"), segmenttest.UniqueTag("rep-b")}
	steady := modeAware(steadyMix(tags...), 1)
	if noSnowflake {
		f.presence = true
		for i := range f.slotArgs {
			f.slotArgs[i] = []string{"--store", dsn, "--mode", "segment", "--snowflake=false"}
		}
		steady = segmentOnly(steadyMix(tags...))
	}
	f.start(0)
	f.start(1)
	for _, tag := range tags {
		createTag(t, f, tag, 1, replicaRowStep)
	}
	return f, steady, tags
}

// asyncFailover runs the scenario on p, whose servers started at began.
func asyncFailover(t *testing.T, began time.Time, p asyncPair) {
	f, steady, _ := replicaFleet(t, p.dsn, p.noSnowflake)
	l := startLoad(f, seed(t), map[string]int{"steady": 5, "fresh": 1},
		map[string]mix{"steady": steady, "fresh": freshMix(segmenttest.UniqueTag("rep-new"))})
	defer l.cancel()

	l.answers(replicaSettle)
	if err := p.stop(); err != nil {
		t.Fatalf("stop the replica: %v\n%s", err, p.logs())
	}
	time.Sleep(replicaBehind) // the lag itself: leases must lapse on the replica
	lacked, err := p.kill()
	killed := time.Now()
	if err != nil {
		t.Fatalf("kill the primary: %v", err)
	}
	if err := p.promote(); err != nil {
		t.Fatalf("promote the replica: %v\n%s", err, p.logs())
	}
	promoted := time.Since(killed)
	third := f.start(2)
	l.answers(afterFailover)

	o := checkLoss(t, f, l, killed, "after a failover to a replica that lost the last commits")
	for _, inst := range f.instances() {
		if strings.Contains(inst.p.Log(), p.password) {
			t.Errorf("%s logged the database password", inst)
		}
	}
	notes := []string{
		fmt.Sprintf("the replica lacked %s at the kill; promoted %v after it; the third process (worker %d) served %v after the kill",
			lacked, promoted.Round(100*time.Millisecond), third.worker(), third.ready.Sub(killed).Round(100*time.Millisecond)),
		o.String(),
	}
	t.Logf("%s: %s; %s", p.scenario, o.load(l), notes[0])
	f.stopAll()
	notes = append(notes, fmt.Sprintf("wall time of the scenario, servers' start included: %v", time.Since(began).Round(time.Second)))
	recordCluster(t, o.row("TestReplicas", p.scenario, fmt.Sprintf("%s; %v behind before the kill", p.how, replicaBehind), l, notes))
}

// loss is what a load through a loss of history (a failover to a stale
// replica, a restore) gave.
type loss struct {
	s                    summary
	segDup, sfDup        int
	holders              []string // processes that stamped under one worker ID at once
	fences               string
	regressions, retries int
	stalls               map[string][]time.Duration
}

// checkLoss stops l, whose fault came at fault, and asserts that no ID
// was handed out twice, that no two processes stamped under one worker
// ID at once, and that every failure was a 503 with Retry-After.
func checkLoss(t *testing.T, f *fleet, l *load, fault time.Time, after string) loss {
	t.Helper()
	o := measureLoss(f, l, fault)
	if n := o.segDup + o.sfDup; n != 0 {
		t.Errorf("%d duplicate IDs (%d segment, %d snowflake) %s; want 0", n, o.segDup, o.sfDup, after)
	}
	for i, h := range o.holders {
		if i == 5 {
			t.Errorf("… %d more overlapping holders", len(o.holders)-5)
			break
		}
		t.Error(h)
	}
	checkSummary(t, o.s, only503)
	logLoadFailures(t, f)
	return o
}

// measureLoss stops l, whose fault came at fault, and counts what it
// gave.
func measureLoss(f *fleet, l *load, fault time.Time) loss {
	l.stop()
	o := loss{s: l.summary()}
	o.holders = overlaps(o.s.runs())
	o.segDup, o.sfDup = o.s.duplicates()
	o.fences = fenceCount(metricSums(f, "idgen_store_fences_total"))
	regressions, _ := metricSums(f, "idgen_segment_regressions_total")
	retries, _ := metricSums(f, "idgen_store_retries_total")
	o.regressions, o.retries = int(regressions), int(retries)
	o.stalls = stallsPerFault(o.s.stalls, []time.Time{fault}, "segment", "snowflake", "new tag")
	return o
}

func (o loss) String() string {
	return fmt.Sprintf("duplicates: %d segment, %d snowflake; processes stamping under one worker ID at once: %d; fences: %s; regressions caught: %d",
		o.segDup, o.sfDup, len(o.holders), o.fences, o.regressions)
}

// load describes the load l and what it gave, for a log line.
func (o loss) load(l *load) string {
	return fmt.Sprintf("%v of load, %d requests; IDs: %d segment, %d snowflake; %s; errors %s; stall %v",
		l.elapsed.Round(time.Millisecond), o.s.requests, o.s.segment, o.s.snowflake, o, formatErrors(o.s.errors), o.stalls)
}

func (o loss) row(test, scenario, faults string, l *load, notes []string) clusterResult {
	return clusterResult{test: test, scenario: scenario, load: l.elapsed, faults: faults,
		segment: o.s.segment, snowflake: o.s.snowflake, duplicates: o.segDup + o.sfDup, stalls: o.stalls,
		retries: o.retries, regressions: strconv.Itoa(o.regressions), fences: o.fences, errors: o.s.errors, notes: notes}
}

// fenceCount is the fences counted (idgen_store_fences_total), or a dash
// if no process exports the metric.
func fenceCount(n float64, found bool) string {
	if !found {
		return "—"
	}
	return strconv.Itoa(int(n))
}
