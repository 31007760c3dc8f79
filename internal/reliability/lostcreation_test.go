package reliability_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/clustertest"
	"github.com/idgen/idgen/internal/testkit"
	"github.com/idgen/idgen/segment/segmenttest"
)

// TestLostCreation creates tags during the lag of an asynchronous
// PostgreSQL failover, on TestReplicas' fleet: two processes run under
// load; the replica stops receiving; one tag is created with `idgen tag
// add`, another by the processes' auto-create, and both are served until
// their max_id is well past the tag floor the fence sets; the primary is
// killed with SIGKILL and the replica, which never saw either tag,
// promoted. A third process starts and is the first to ask for the lost
// tags, so it creates them again unless a live process's witness raise
// has; then every process serves them. Every ID of the lost tags and of
// the steady tags is collected: none may be handed out twice. Each run
// is a replica pair of its own; IDGEN_LOSTCREATION_RUNS sets how many
// (default 2, about 15 s each on 2 cores; the 20 were run with
// it set).
//
// What keeps it safe is the witness raise: a live process that finds a
// tag it reserved from missing creates it at the end of what it
// reserved. The tag floor alone would not, as the tags reach past it.
func TestLostCreation(t *testing.T) {
	binary(t)
	runs := envCount(t, "IDGEN_LOSTCREATION_RUNS", 2)
	began := time.Now()
	sd := seed(t)
	total := clusterResult{test: "TestLostCreation", scenario: "postgres", errors: map[string]int{}, stalls: map[string][]time.Duration{}}
	var lagIDs, lagDups, fences, regressions int
	for run := range runs {
		r := lostRun(t, sd+uint64(run))
		s := r.o.s
		total.load += r.elapsed
		total.segment, total.snowflake = total.segment+s.segment, total.snowflake+s.snowflake
		total.duplicates += r.o.segDup + r.o.sfDup
		total.retries += r.o.retries
		regressions += r.o.regressions
		for k, v := range s.errors {
			total.errors[k] += v
		}
		for k, ds := range r.o.stalls {
			total.stalls[k] = append(total.stalls[k], ds...)
		}
		lagIDs, lagDups, fences = lagIDs+r.lagIDs, lagDups+r.lagDups, fences+r.fences
		t.Logf("run %d: %s; lost tags: %d IDs, %d twice, max_id at the kill %v, tag floor after the fence %d; %d fences",
			run+1, r.o.load(r.l), r.lagIDs, r.lagDups, r.highs, r.floor, r.fences)
	}
	total.regressions, total.fences = strconv.Itoa(regressions), strconv.Itoa(fences)
	total.faults = fmt.Sprintf("%d × two tags created during the lag (idgen tag add, auto-create) and served past the tag floor, then kill -9 of the primary and the replica promoted; a third process is the first to ask for them after it", runs)
	total.notes = []string{
		fmt.Sprintf("%d runs: %d IDs of the tags created during the lag, %d of them twice; %d fences", runs, lagIDs, lagDups, fences),
		fmt.Sprintf("wall time, servers' start included: %v", time.Since(began).Round(time.Second)),
	}
	t.Logf("%d runs: %d IDs (%d of the tags created during the lag), %d duplicates (%d of those tags), %d fences, wall time %v",
		runs, total.segment+total.snowflake, lagIDs, total.duplicates, lagDups, fences, time.Since(began).Round(time.Second))
	recordCluster(t, total)
}

// lostResult is what one run of TestLostCreation gave.
type lostResult struct {
	o               loss
	l               *load
	elapsed         time.Duration
	lagIDs, lagDups int
	highs           []int64 // each lost tag's max_id at the kill
	floor           int64   // the tag floor after the failover's fence
	fences          int
}

// lagReach is how far each lost tag's max_id goes during the lag: well
// past the tag floor the failover's fence sets here (20,000 in the runs:
// a margin of 2 × the steady tags' step × (leases + 1), times the 2
// failovers a fence counts at least), so that a tag created again at the
// floor hands out IDs handed out before. lostRun checks it did.
const lagReach = 40 * replicaRowStep

// The phases of a run, by who asks for the lost tags.
const (
	lagNone     = iota // before the lag: nobody (they do not exist yet)
	lagAll             // during the lag, and at the end: every process
	lagNewcomer        // from just before the kill: the third process only
)

// lostRun is one run of TestLostCreation on a replica pair of its own.
func lostRun(t *testing.T, sd uint64) lostResult {
	t.Helper()
	ctx := context.Background()
	p := clustertest.StartPGReplica(t)
	f, steady, tags := replicaFleet(t, p.DSN, false)
	lost := []string{segmenttest.UniqueTag("lag-cli"), segmenttest.UniqueTag("lag-auto")}
	var phase atomic.Int32
	open := func(slot int) bool {
		ph := phase.Load()
		return ph == lagAll || ph == lagNewcomer && slot == 2
	}
	l := startLoad(f, sd, map[string]int{"steady": 3, "fresh": 3},
		map[string]mix{"steady": steady, "fresh": lagMix(steady, open, lost...)})
	defer l.cancel()
	until := func(what string, every time.Duration, cond func() error) {
		t.Helper()
		if err := testkit.WaitFor(60*time.Second, every, cond); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, p.Logs(20))
		}
	}

	// The replica has the steady tags and their first reservations.
	until("the steady load", 100*time.Millisecond, func() error {
		if v, _ := metricSums(f, reservedOf(tags[0])); v < 3*replicaRowStep {
			return fmt.Errorf("%v IDs of %s reserved", v, tags[0])
		}
		return nil
	})
	lsn, err := p.Primary.Query("SELECT pg_current_wal_lsn()::text")
	if err != nil {
		t.Fatal(err)
	}
	until("the replica's replay", 100*time.Millisecond, func() error {
		if v, err := p.Replica.Query("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn); err != nil || v != "true" {
			return fmt.Errorf("not at %s yet (%v)", lsn, err)
		}
		return nil
	})
	if err := p.StopReplica(); err != nil {
		t.Fatalf("stop the replica: %v\n%s", err, p.Logs(20))
	}

	// The lag: the operator creates one tag, the processes' auto-create
	// the other on its first request.
	if out, err := exec.Command(f.bin, "tag", "add", lost[0], "--step", strconv.Itoa(replicaCap), "--store", p.DSN).CombinedOutput(); err != nil {
		t.Fatalf("idgen tag add %s: %v\n%s", lost[0], err, out)
	}
	phase.Store(lagAll)
	until("the lost tags' reservations", 100*time.Millisecond, func() error {
		for _, tag := range lost {
			if n, err := f.db.maxID(ctx, tag); err != nil || n < lagReach {
				return fmt.Errorf("%s: max_id %d, want %d (%v)", tag, n, lagReach, err)
			}
		}
		return nil
	})
	// The first reservation of a lost tag after the failover must be the
	// newcomer's, which knows nothing of it: the first two processes'
	// reservations of them in flight end first.
	phase.Store(lagNewcomer)
	highs := make([]int64, len(lost))
	until("the lost tags' reservations in flight", 200*time.Millisecond, func() error {
		var err error
		for i, tag := range lost {
			n, qerr := f.db.maxID(ctx, tag)
			if qerr != nil || n != highs[i] {
				err = fmt.Errorf("%s: max_id %d, then %d (%v)", tag, highs[i], n, qerr)
			}
			highs[i] = n
		}
		return err
	})
	lacked, err := p.KillPrimary()
	killed := time.Now()
	if err != nil {
		t.Fatalf("kill the primary: %v", err)
	}
	if err := p.Promote(); err != nil {
		t.Fatalf("promote the replica: %v\n%s", err, p.Logs(20))
	}
	third := f.start(2)
	until("the newcomer's IDs of the lost tags", 100*time.Millisecond, func() error {
		for _, tag := range lost {
			if v, err := metricValue(f, third, issuedOf(tag)); err != nil || v < 3*replicaCap {
				return fmt.Errorf("%s: %v IDs (%v)", tag, v, err)
			}
		}
		return nil
	})
	var floor int64
	until("the tag floor", 100*time.Millisecond, func() error {
		return f.db.db.QueryRowContext(ctx, "SELECT tag_floor FROM idgen_fence WHERE id = 1").Scan(&floor)
	})
	for i, tag := range lost {
		// What the first two processes may have held unused at the
		// kill: two segments each.
		if highs[i]-4*replicaCap <= floor {
			t.Errorf("%s reached %d before the kill, not past the tag floor %d: the run cannot tell the witness raise from the floor", tag, highs[i], floor)
		}
	}

	// Every process serves the lost tags, the first two from new
	// reservations.
	phase.Store(lagAll)
	first := f.live()[:2]
	from := map[string]float64{}
	for _, inst := range first {
		for _, tag := range lost {
			from[inst.url+tag], _ = metricValue(f, inst, reservedOf(tag))
		}
	}
	until("the first two processes' new reservations of the lost tags", 100*time.Millisecond, func() error {
		for _, inst := range first {
			for _, tag := range lost {
				if v, err := metricValue(f, inst, reservedOf(tag)); err != nil || v < from[inst.url+tag]+2*replicaCap {
					return fmt.Errorf("%s: %s: %v IDs reserved, from %v (%v)", inst, tag, v, from[inst.url+tag], err)
				}
			}
		}
		return nil
	})

	o := checkLoss(t, f, l, killed, "after a failover that lost the creation of two tags")
	r := lostResult{o: o, l: l, elapsed: l.elapsed, highs: highs, floor: floor}
	for _, tag := range lost {
		ids := o.s.segIDs[tag]
		d := duplicates(ids)
		r.lagIDs, r.lagDups = r.lagIDs+len(ids), r.lagDups+d
		if len(ids) == 0 {
			t.Errorf("no ID of %s collected", tag)
		}
	}
	if r.lagDups != 0 {
		t.Errorf("%d IDs of the tags created during the lag handed out twice; want 0", r.lagDups)
	}
	if err := f.db.db.QueryRowContext(ctx, "SELECT fences FROM idgen_fence WHERE id = 1").Scan(&r.fences); err != nil {
		t.Fatal(err)
	}
	if r.fences == 0 {
		t.Error("the failover was not fenced")
	}
	t.Logf("the replica lacked %d bytes of WAL at the kill; steady tags %v, lost tags %v", lacked, tags, lost)
	f.stopAll()
	return r
}

// lagMix asks for IDs of tags, tracked, in batches, while open says the
// client's slot may; otherwise what steady asks.
func lagMix(steady mix, open func(slot int) bool, tags ...string) mix {
	counts := []int{5, 20, 50}
	return func(c *client) request {
		if !open(c.slot) {
			return steady(c)
		}
		tag := tags[c.rng.IntN(len(tags))]
		n := counts[c.rng.IntN(len(counts))]
		return request{mode: "segment", tag: tag, path: "/segment/" + tag + "?count=" + strconv.Itoa(n), count: n, track: true}
	}
}

// reservedOf and issuedOf name a tag's series of
// idgen_segment_reserved_ids_total and of idgen_ids_issued_total (segment
// IDs), as /metrics writes them.
func reservedOf(tag string) string {
	return `idgen_segment_reserved_ids_total{tag="` + tag + `"}`
}

func issuedOf(tag string) string {
	return `idgen_ids_issued_total{mode="segment",tag="` + tag + `"}`
}

// maxID reads a tag's max_id; sql.ErrNoRows if it has no row.
func (d *sqlDB) maxID(ctx context.Context, tag string) (int64, error) {
	var n int64
	err := d.db.QueryRowContext(ctx, d.bind("SELECT max_id FROM id_sequence WHERE biz_tag = ?"), tag).Scan(&n)
	return n, err
}
