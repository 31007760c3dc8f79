package reliability_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
)

// The idgen binary is built once per test run, into binDir.
var (
	binDir  string
	binOnce sync.Once
	binPath string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "idgen-reliability-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	if err := writeResults(); err != nil {
		fmt.Fprintln(os.Stderr, "reliability: write results:", err)
		code = 1
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// binary returns the path of the idgen binary, building it on first use
// with the build tags of IDGEN_RELIABILITY_TAGS, if any.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("a long run of real idgen processes: skipped under -short")
	}
	binOnce.Do(func() {
		tags := os.Getenv("IDGEN_RELIABILITY_TAGS")
		if tags != "" {
			// A plant re-opens a hole: such a run shows a test bites, and
			// must not pass for the product's.
			t.Logf("idgen built with -tags %s, IDGEN_PLANT=%q", tags, os.Getenv("IDGEN_PLANT"))
		}
		binPath = proctest.BinaryTags(t, binDir, tags)
	})
	if binPath == "" {
		t.Fatal("the idgen binary failed to build in an earlier test")
	}
	return binPath
}

// profile is how hard TestFaults pushes: IDGEN_FAULT_PROFILE=ci (the
// default, for go test ./... in CI) or long.
type profile struct {
	name         string
	killLoad     time.Duration    // load time of the kill scenario
	killGap      [2]int64         // random load between kills, in answers (load.answers)
	restartDelay [2]time.Duration // random time a killed instance stays down
	outages      int              // database restart + pause cycles
	dbDown       time.Duration    // how long a stopped database stays down
	pause        time.Duration    // how long a paused database stays frozen
	clockGaps    []time.Duration  // how far last_timestamp is moved ahead
	slowloris    int              // slow connections opened at once
}

func faultProfile(t *testing.T) profile {
	switch p := os.Getenv("IDGEN_FAULT_PROFILE"); p {
	case "", "ci":
		return profile{name: "ci", killLoad: 60 * time.Second,
			killGap: [2]int64{10_000, 30_000}, restartDelay: [2]time.Duration{0, 1500 * time.Millisecond},
			outages: 1, dbDown: 3 * time.Second, pause: 10 * time.Second,
			clockGaps: []time.Duration{3 * time.Millisecond, 50 * time.Millisecond, 10 * time.Second}, slowloris: 20}
	case "long":
		return profile{name: "long", killLoad: 300 * time.Second,
			killGap: [2]int64{5_000, 40_000}, restartDelay: [2]time.Duration{0, 4 * time.Second},
			outages: 3, dbDown: 10 * time.Second, pause: 30 * time.Second,
			clockGaps: []time.Duration{3 * time.Millisecond, 50 * time.Millisecond, time.Second, 10 * time.Second}, slowloris: 200}
	default:
		t.Fatalf("IDGEN_FAULT_PROFILE=%q: want ci or long", p)
		return profile{}
	}
}

// envSeconds reads a whole number of seconds from name, or def.
func envSeconds(t *testing.T, name string, def int) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return time.Duration(def) * time.Second
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a whole number of seconds, at least 1", name, v)
	}
	return time.Duration(n) * time.Second
}

// envCount reads a positive whole number from name, or def.
func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// result is one row of the results table: one scenario's run.
type result struct {
	test, scenario string
	load           time.Duration // time under load
	faults         string        // faults injected, in words
	segment        int           // segment IDs received
	snowflake      int           // snowflake IDs received
	duplicates     int
	errors         map[string]int // failed requests by HTTP status and code, or transport error
	stall          time.Duration  // longest time a client waited for a successful answer
	notes          []string       // findings beside the figures
	failed         bool
}

var results struct {
	sync.Mutex
	profile  string
	scaleout time.Duration
	rows     []result

	clusterProfile string
	clusters       []clusterResult // see clusters_results_test.go
}

// record adds r to the table of this run and logs it.
func record(t *testing.T, r result) {
	t.Helper()
	r.failed = t.Failed()
	results.Lock()
	results.rows = append(results.rows, r)
	results.Unlock()
	t.Logf("result: %s", formatRow(r))
}

// logTable logs the rows of test so far as a Markdown table.
func logTable(t *testing.T, test string) {
	t.Helper()
	logRows(t, test, resultHeader, func() []result { return results.rows })
}

const resultHeader = "| scenario | load | faults injected | segment IDs | snowflake IDs | duplicates | errors by code | longest stall |\n" +
	"|---|---|---|---:|---:|---:|---|---:|\n"

func table(rows []result) string { return markdown(resultHeader, rows) }

// row is what a results table needs of one result.
type row interface {
	id() (test, scenario string, notes []string)
	cells() string
}

func (r result) id() (string, string, []string) { return r.test, r.scenario, r.notes }
func (r result) cells() string                  { return formatRow(r) }

// logRows logs the rows of test among those all returns (called under the
// results lock) as a Markdown table under header.
func logRows[R row](t *testing.T, test, header string, all func() []R) {
	t.Helper()
	results.Lock()
	var rows []R
	for _, r := range all() {
		if name, _, _ := r.id(); name == test {
			rows = append(rows, r)
		}
	}
	results.Unlock()
	t.Logf("%s results:\n%s", test, markdown(header, rows))
}

// markdown renders rows under header (a table's first two lines), then
// each row's notes.
func markdown[R row](header string, rows []R) string {
	var b strings.Builder
	b.WriteString(header)
	for _, r := range rows {
		b.WriteString("| " + r.cells() + " |\n")
	}
	for _, r := range rows {
		test, scenario, notes := r.id()
		for i, n := range notes {
			if i == 0 {
				fmt.Fprintf(&b, "\n%s/%s:\n\n", test, scenario)
			}
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

func formatRow(r result) string {
	name := r.test + "/" + r.scenario
	if r.failed {
		name += " (FAILED)"
	}
	load, stall := "—", "—"
	if r.load > 0 {
		load = r.load.Round(time.Second).String()
	}
	if r.stall > 0 {
		stall = r.stall.Round(time.Millisecond).String()
	}
	return strings.Join([]string{name, load, r.faults,
		strconv.Itoa(r.segment), strconv.Itoa(r.snowflake), strconv.Itoa(r.duplicates),
		formatErrors(r.errors), stall}, " | ")
}

func formatErrors(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, "; ")
}

// writeResults writes results/latest.md when IDGEN_RELIABILITY_WRITE=1,
// and, after a complete run in which every scenario passed, the same
// table into docs/reliability.md between its results markers.
func writeResults() error {
	if os.Getenv("IDGEN_RELIABILITY_WRITE") != "1" {
		return nil
	}
	results.Lock()
	defer results.Unlock()
	if err := writeClusterResults(); err != nil {
		return err
	}
	if len(results.rows) == 0 {
		return nil
	}
	prof := results.profile
	if prof == "" {
		prof = "(TestFaults not run)"
	}
	scale := "(TestScaleOut not run)"
	if results.scaleout > 0 {
		scale = results.scaleout.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s: fault profile %s, scale-out load %s per database; %s/%s, %d CPUs, %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), prof, scale, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	b.WriteString(table(results.rows))
	body := b.String()
	if err := os.MkdirAll("results", 0o755); err != nil {
		return err
	}
	latest := "<!-- Generated by the tests in ./reliability with IDGEN_RELIABILITY_WRITE=1; do not edit. -->\n# Latest reliability run\n\n" + body
	if err := os.WriteFile(filepath.Join("results", "latest.md"), []byte(latest), 0o644); err != nil {
		return err
	}
	if len(results.rows) < 6 || slices.ContainsFunc(results.rows, func(r result) bool { return r.failed }) {
		return nil // a partial or failing run does not replace the documented one
	}
	return replaceBetween(filepath.Join("..", "..", "docs", "reliability.md"), "<!-- results:begin -->\n", "<!-- results:end -->", body)
}

// replaceBetween replaces what lies between the markers begin and end in
// the file at path.
func replaceBetween(path, begin, end, text string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(doc)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s lacks the markers %q and %q", path, strings.TrimSpace(begin), end)
	}
	return os.WriteFile(path, []byte(s[:i+len(begin)]+text+s[j:]), 0o644)
}
