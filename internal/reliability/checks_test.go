package reliability_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/snowflake"
)

// The checks that the scenarios rely on must be able to fail: each is
// fed a history with the violation it exists to catch, and a clean one.

func TestChecks_Duplicates(t *testing.T) {
	for _, tc := range []struct {
		ids  []int64
		want int
	}{
		{nil, 0},
		{[]int64{3, 1, 2}, 0},
		{[]int64{5, 1, 5, 2, 5}, 2},
		{[]int64{7, 7}, 1},
	} {
		if got := duplicates(slices.Clone(tc.ids)); got != tc.want {
			t.Errorf("duplicates(%v) = %d, want %d", tc.ids, got, tc.want)
		}
	}
}

func TestChecks_MergedDuplicates(t *testing.T) {
	for _, tc := range []struct {
		lists [][]int64
		want  int
	}{
		{nil, 0},
		{[][]int64{{1, 3, 5}, {2, 4, 6}, {}}, 0},
		{[][]int64{{1, 3, 5}, {3, 4}, {5, 9}}, 2},
		{[][]int64{{1, 1, 2}, {1}}, 2},
	} {
		if got := mergedDuplicates(tc.lists); got != tc.want {
			t.Errorf("mergedDuplicates(%v) = %d, want %d", tc.lists, got, tc.want)
		}
	}
}

func TestChecks_ParseIDs(t *testing.T) {
	for _, tc := range []struct {
		body    string
		want    []int64
		wantErr bool
	}{
		{"42", []int64{42}, false},
		{"1\n2\n3\n", []int64{1, 2, 3}, false},
		{"", []int64{}, false},
		{"1\nx\n", nil, true},
		{"-1", nil, true},
		{`{"id":"1"}`, nil, true},
	} {
		got, err := parseIDs([]byte(tc.body))
		if (err != nil) != tc.wantErr || (!tc.wantErr && !slices.Equal(got, tc.want)) {
			t.Errorf("parseIDs(%q) = %v, %v; want %v (error %v)", tc.body, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestChecks_ClaimsIn(t *testing.T) {
	log := `time=2026-11-29T22:24:14.871Z level=INFO msg="schema ready" version=2
time=2026-11-29T22:24:14.872Z level=INFO msg="snowflake: worker ID claimed" owner=vm/7075/5e644659 worker_id=3 expires_at=2026-11-29T22:24:17.871Z last_timestamp=0001-01-01T00:00:00.000Z
time=2026-11-29T22:24:20.000Z level=INFO msg="snowflake: worker ID claimed" owner=vm/7075/5e644659 worker_id=0 expires_at=2026-11-29T22:24:23.000Z last_timestamp=2026-11-29T22:24:19.500Z
`
	got, err := claimsIn(log, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ms := func(sec, msec int) int64 { return time.Date(2026, 11, 29, 22, 24, sec, msec*1e6, time.UTC).UnixMilli() }
	want := []claim{
		{owner: "vm/7075/5e644659", worker: 3, at: ms(14, 871), expiresAt: ms(17, 871), floor: 0},
		{owner: "vm/7075/5e644659", worker: 0, at: ms(20, 0), expiresAt: ms(23, 0), floor: ms(19, 500)},
	}
	if !slices.Equal(got, want) {
		t.Errorf("claimsIn = %+v\nwant      %+v", got, want)
	}
}

func TestChecks_LowestFree(t *testing.T) {
	rows := []leaseRow{
		{worker: 0, owner: "a", expiresAt: 2000},
		{worker: 1, owner: "dead", expiresAt: 1500},
		{worker: 2, owner: ""},
	}
	for _, tc := range []struct {
		now  int64
		want int64
	}{
		{1000, 2}, // 1 is still leased
		{1500, 1}, // expired exactly now: free
		{2500, 0}, // everything expired
		{1499, 2},
	} {
		if got := lowestFree(rows, tc.now); got != tc.want {
			t.Errorf("lowestFree at %d = %d, want %d", tc.now, got, tc.want)
		}
	}
	if got := lowestFree(rows[:1], 1000); got != 1 {
		t.Errorf("lowestFree with no free row = %d, want the next worker ID, 1", got)
	}
}

func TestChecks_Overlaps(t *testing.T) {
	for _, tc := range []struct {
		name string
		runs []run
		want int
	}{
		{"one holder after another", []run{{inst: 0, worker: 1, first: 10, last: 20}, {inst: 1, worker: 1, first: 21, last: 30}}, 0},
		{"same millisecond", []run{{inst: 0, worker: 1, first: 10, last: 20}, {inst: 1, worker: 1, first: 20, last: 30}}, 1},
		{"inside a long holder", []run{{inst: 0, worker: 1, first: 10, last: 100}, {inst: 1, worker: 1, first: 40, last: 41}, {inst: 2, worker: 1, first: 50, last: 60}}, 2},
		{"different workers", []run{{inst: 0, worker: 1, first: 10, last: 20}, {inst: 1, worker: 2, first: 10, last: 20}}, 0},
		{"one process back on its worker", []run{{inst: 0, worker: 1, first: 10, last: 20}, {inst: 0, worker: 1, first: 30, last: 40}}, 0},
	} {
		if got := overlaps(tc.runs); len(got) != tc.want {
			t.Errorf("%s: %d overlaps %q, want %d", tc.name, len(got), got, tc.want)
		}
	}
}

func TestChecks_LeaseViolations(t *testing.T) {
	t0 := time.Now()
	dead := func() *instance {
		return &instance{seq: 0, start: t0, killed: t0.Add(time.Second), held: true,
			final:  leaseRow{worker: 1, expiresAt: 5000, lastTS: 4000},
			claims: []claim{{worker: 1, at: 1000, expiresAt: 4000}}}
	}
	next := func(c claim) *instance {
		return &instance{seq: 1, start: t0.Add(2 * time.Second), claims: []claim{c}}
	}
	for _, tc := range []struct {
		name string
		new  claim
		runs []run
		want int
	}{
		{"clean takeover", claim{worker: 1, at: 5000, floor: 5000},
			[]run{{inst: 0, worker: 1, first: 1000, last: 4600}, {inst: 1, worker: 1, first: 5001, last: 6000}}, 0},
		{"another worker while the lease is live", claim{worker: 2, at: 3000},
			[]run{{inst: 1, worker: 2, first: 3000, last: 6000}}, 0},
		{"claimed before the dead lease expired", claim{worker: 1, at: 4999, floor: 5000},
			[]run{{inst: 1, worker: 1, first: 5001, last: 6000}}, 1},
		{"dead holder issued at its expiry", claim{worker: 2, at: 3000},
			[]run{{inst: 0, worker: 1, first: 1000, last: 5000}}, 1},
		{"issued at the floor", claim{worker: 1, at: 5000, floor: 5000},
			[]run{{inst: 1, worker: 1, first: 5000, last: 6000}}, 1},
	} {
		got := leaseViolations([]*instance{dead(), next(tc.new)}, tc.runs)
		if len(got) != tc.want {
			t.Errorf("%s: %d violations %q, want %d", tc.name, len(got), got, tc.want)
		}
	}
}

func TestChecks_Runs(t *testing.T) {
	id := func(ms, worker, seq int64) int64 {
		v, err := snowflake.Layout{}.Encode(snowflake.Parts{Time: time.UnixMilli(ms), WorkerID: worker, Sequence: seq})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	s := summary{sfIDs: map[int][]int64{
		0:  {id(base+5, 1, 0), id(base, 1, 0), id(base+1, 1, 7), id(base+20, 2, 0), id(base+30, 1, 0)},
		-1: {id(base, 9, 0)},
	}}
	got := s.runs()
	want := []run{
		{inst: 0, worker: 1, first: base, last: base + 5, firstID: id(base, 1, 0), ids: 3},
		{inst: 0, worker: 2, first: base + 20, last: base + 20, firstID: id(base+20, 2, 0), ids: 1},
		{inst: 0, worker: 1, first: base + 30, last: base + 30, firstID: id(base+30, 1, 0), ids: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("runs = %+v\nwant   %+v", got, want)
	}
}

func TestMarkdown(t *testing.T) {
	rows := []result{
		{test: "TestFaults", scenario: "kill", faults: "kill -9", segment: 10, notes: []string{"first", "second"}},
		{test: "TestFaults", scenario: "pause", faults: "pause", snowflake: 5},
	}
	got := markdown(resultHeader, rows)
	want := resultHeader +
		"| " + formatRow(rows[0]) + " |\n" +
		"| " + formatRow(rows[1]) + " |\n" +
		"\nTestFaults/kill:\n\n- first\n- second\n"
	if got != want {
		t.Fatalf("markdown =\n%s\nwant\n%s", got, want)
	}
	if !strings.HasPrefix(clusterTable(nil), "| scenario | load | faults injected") {
		t.Fatalf("cluster table header: %q", clusterTable(nil))
	}
}
