package reliability_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/dbtest"
)

// TestOneTableRestore sets id_sequence alone back to a copy of itself
// taken a few seconds earlier, under three running instances (idle
// meanwhile, so that the first to reserve is the newcomer), and starts a
// fourth after it: the restore of one table that keeps the server's
// identity and every other table (docs/fencing.md). The load also
// creates a tag on every request of its "fresh" clients, so tags created
// after the copy are lost by the restore and created again. Each run is
// a database of its own; IDGEN_ONETABLE_RUNS sets how many (default 6,
// about 14 s each on 2 cores; the 20 were run with it set).
// Asserted: no ID twice in any run.
//
// What keeps it safe is idgen_mark: every reservation records its end
// beside the row, in its own transaction, and the first reservation
// after the restore finds the row below its mark and fences, whichever
// instance makes it.
func TestOneTableRestore(t *testing.T) {
	binary(t)
	runs := envCount(t, "IDGEN_ONETABLE_RUNS", 6)
	sd := seed(t)
	var segment, dups, fences int
	errs := map[string]int{}
	for run := range runs {
		srv := dbtest.Start(t, dbtest.Postgres)
		s, d, fenced := oneTableRun(t, srv.DSN, sd+uint64(run))
		segment, dups, fences = segment+s.segment, dups+d, fences+fenced
		for k, v := range s.errors {
			errs[k] += v
		}
		if d != 0 {
			t.Errorf("run %d: %d IDs handed out twice", run+1, d)
		}
	}
	t.Logf("%d runs: %d segment IDs, %d duplicates, %d fences; errors %s", runs, segment, dups, fences, formatErrors(errs))
	record(t, result{test: "TestOneTableRestore", scenario: "id_sequence set back 3,000 answers, 3 running + 1 new",
		faults:  fmt.Sprintf("%d × id_sequence alone restored from a copy 3,000 answers old, on PostgreSQL", runs),
		segment: segment, duplicates: dups, errors: errs,
		notes: []string{fmt.Sprintf("%d fences in %d runs", fences, runs)}})
}

// oneTableRun is one run of TestOneTableRestore on dsn: it returns the
// load's summary, its duplicate segment IDs and the fences recorded.
func oneTableRun(t *testing.T, dsn string, sd uint64) (summary, int, int) {
	t.Helper()
	ctx := context.Background()
	f := newFleet(t, dsn, 4, leaseTTL, "--default-step", "50", "--snowflake=false")
	f.presence = true
	for slot := range 3 {
		f.start(slot)
	}
	tagA, tagB := segmenttest.UniqueTag("one-a"), segmenttest.UniqueTag("one-b")
	l := startLoad(f, sd, map[string]int{"steady": 3, "fresh": 1},
		map[string]mix{"steady": segmentOnly(steadyMix(tagA, tagB)), "fresh": creatingMix(segmenttest.UniqueTag("one-new"))})
	defer l.cancel()
	exec := func(q string) {
		t.Helper()
		if _, err := f.db.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	l.answers(1_500) // load before the copy: rows to go back to
	exec("CREATE TABLE one_table_copy AS SELECT * FROM id_sequence")
	l.answers(3_000) // what the copy lacks
	// The running instances' clients pause from just before the restore
	// until the new one has served from it for a while: the first
	// reservation after the restore is the newcomer's, which knows
	// nothing of the store's history (the case only the mark catches).
	// An empty slot is one the clients wait for.
	running := f.live()[:3]
	for slot := range running {
		f.slots[slot].Store(nil)
	}
	l.quiet()
	tx, err := f.db.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"DELETE FROM id_sequence", "INSERT INTO id_sequence SELECT * FROM one_table_copy"} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	f.start(3)
	l.answers(500) // the newcomer's alone
	for slot, inst := range running {
		f.slots[slot].Store(inst)
	}
	l.answers(4_500)
	l.stop()
	s := l.summary()
	segDup, _ := s.duplicates()
	var fences int
	if err := f.db.db.QueryRowContext(ctx, "SELECT fences FROM idgen_fence WHERE id = 1").Scan(&fences); err != nil {
		t.Fatal(err)
	}
	if fences == 0 {
		t.Error("the restore of id_sequence was not fenced")
	}
	for key := range s.errors {
		if !strings.HasPrefix(key, "503 ") {
			t.Errorf("%d requests failed with %s; only 503 (held, unavailable) is expected around a fence", s.errors[key], key)
		}
	}
	f.stopAll()
	return s, segDup, fences
}

// creatingMix asks for a new tag every 10 requests of a client and for
// IDs of it until then, tracked: tags created after the copy are lost by
// the restore and created again, by this client or by the store's mark.
func creatingMix(prefix string) mix {
	return func(c *client) request {
		tag := fmt.Sprintf("%s-%d-%d", prefix, c.id, c.sent/10)
		return request{mode: "segment", tag: tag, path: "/segment/" + tag + "?count=3", count: 3, track: true}
	}
}
