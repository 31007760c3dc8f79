// Command report runs the in-process benchmarks of this module, keeps the
// raw output, and summarises it with benchstat as a Markdown table: median
// ns/op and allocs/op per generator, single goroutine and parallel, and
// each median as a multiple of the bare atomic add measured in the same
// run.
//
// Run it from the bench module:
//
//	go run ./cmd/report [-count 6] [-benchtime 200ms] [-docs ../../docs/benchmarks.md]
//
// It writes results/inprocess.txt (raw go test output, the input for
// benchstat) and results/inprocess.md (the table between the markers
// <!-- inprocess:begin --> and <!-- inprocess:end -->), and prints the
// table. With -docs it also replaces what lies between those markers in
// the named file, which must already contain both.
package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

const (
	modulePath  = "github.com/idgen/idgen/internal/bench"
	beginMarker = "<!-- inprocess:begin -->"
	endMarker   = "<!-- inprocess:end -->"
	floor       = "atomic-add"
	batchRow    = "idgen-snowflake-NextN100"
	batchSize   = 100
)

func main() {
	count := flag.Int("count", 6, "runs of each benchmark; benchstat wants at least 6 for confidence intervals")
	benchtime := flag.String("benchtime", "200ms", "go test -benchtime for each run")
	docs := flag.String("docs", "", "optional Markdown file whose "+beginMarker+" … "+endMarker+" section is replaced")
	live := registerLiveFlags() // -all, -quick: see live.go
	flag.Parse()
	live.adjust(count, benchtime)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m := newMeta(*live.quick)
	if live.inProcess() {
		if err := run(ctx, *count, *benchtime, *docs); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	}
	if err := live.run(ctx, m, *docs); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, count int, benchtime, docs string) error {
	if count < 1 {
		return fmt.Errorf("-count must be at least 1, not %d", count)
	}
	dir, err := moduleDir(ctx)
	if err != nil {
		return err
	}
	results := filepath.Join(dir, "results")
	if err := os.MkdirAll(results, 0o755); err != nil {
		return err
	}

	// Only the module's root package holds the in-process benchmarks;
	// other packages of the module (HTTP benchmarks) have reports of their
	// own. The raw output goes to stderr as it comes, to show progress.
	start := time.Now()
	var raw bytes.Buffer
	test := exec.CommandContext(ctx, "go", "test", "-run=^$", "-bench=.", "-benchmem",
		"-count="+strconv.Itoa(count), "-benchtime="+benchtime, "-timeout=1h", modulePath)
	test.Dir = dir
	test.Stdout = io.MultiWriter(&raw, os.Stderr)
	test.Stderr = os.Stderr
	if err := test.Run(); err != nil {
		return fmt.Errorf("go test: %w", err)
	}
	took := time.Since(start).Round(time.Second)
	rawPath := filepath.Join(results, "inprocess.txt")
	if err := os.WriteFile(rawPath, raw.Bytes(), 0o644); err != nil {
		return err
	}

	var csvOut, csvErr bytes.Buffer
	stat := exec.CommandContext(ctx, "go", "tool", "benchstat", "-format", "csv", rawPath)
	stat.Dir = dir
	stat.Stdout, stat.Stderr = &csvOut, &csvErr
	if err := stat.Run(); err != nil {
		return fmt.Errorf("benchstat: %w\n%s", err, csvErr.Bytes())
	}
	s, err := parseCSV(csvOut.Bytes())
	if err != nil {
		return fmt.Errorf("benchstat output: %w", err)
	}

	md := markdown(s, raw.Bytes(), count, benchtime, took)
	if err := os.WriteFile(filepath.Join(results, "inprocess.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	fmt.Fprintf(os.Stderr, "report: benchmarks took %v; raw output in %s\n", took, rawPath)
	if docs != "" {
		return splice(docs, md)
	}
	return nil
}

// moduleDir returns the root of the bench module, which must be the main
// module of the working directory.
func moduleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Path}}\t{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m: %w", err)
	}
	path, dir, _ := strings.Cut(strings.TrimSpace(string(out)), "\t")
	if path != modulePath {
		return "", fmt.Errorf("run this from the %s module (the bench directory), not %s", modulePath, path)
	}
	return dir, nil
}

// stat is one median with its confidence interval as benchstat's CSV
// gives it ("3%", or "∞" with too few runs).
type stat struct {
	median float64
	ci     string
}

// summary holds benchstat's medians by unit, then by benchmark name
// without the GOMAXPROCS suffix, the names in order of appearance, and
// GOMAXPROCS as that suffix gave it (go test omits it for 1).
type summary struct {
	byUnit map[string]map[string]stat
	names  []string
	procs  string
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// parseCSV reads benchstat's CSV: one table per unit, each opened by a row
// ",<unit>,CI" and closed by a "geomean" row; other rows are the run's
// configuration.
func parseCSV(data []byte) (summary, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return summary{}, err
	}
	s := summary{byUnit: map[string]map[string]stat{}, procs: "1"}
	seen := map[string]bool{}
	unit := ""
	for _, row := range rows {
		switch {
		case len(row) < 2:
			// configuration ("goos: linux") or the blank line between tables
		case row[0] == "" && len(row) >= 3 && row[2] == "CI":
			unit = row[1]
			s.byUnit[unit] = map[string]stat{}
		case row[0] == "" || row[0] == "geomean" || unit == "":
			// the header naming the input file, or the summary row
		default:
			v, err := strconv.ParseFloat(row[1], 64)
			if err != nil {
				return summary{}, fmt.Errorf("%s %s: %w", row[0], unit, err)
			}
			name := row[0]
			if m := procsSuffix.FindString(name); m != "" {
				name, s.procs = strings.TrimSuffix(name, m), m[1:]
			}
			st := stat{median: v}
			if len(row) >= 3 {
				st.ci = row[2]
			}
			s.byUnit[unit][name] = st
			if !seen[name] {
				seen[name] = true
				s.names = append(s.names, name)
			}
		}
	}
	if len(s.byUnit["sec/op"]) == 0 {
		return summary{}, errors.New("no sec/op table")
	}
	return s, nil
}

// markdown renders one row per generator with its single-goroutine and
// parallel columns side by side.
func markdown(s summary, raw []byte, count int, benchtime string, took time.Duration) string {
	var gens []string
	has := map[string]bool{}
	for _, name := range s.names {
		bench, gen, ok := strings.Cut(name, "/")
		if !ok || (bench != "Next" && bench != "NextParallel") || has[gen] {
			continue
		}
		has[gen] = true
		gens = append(gens, gen)
	}

	var b strings.Builder
	b.WriteString(beginMarker + "\n")
	fmt.Fprintf(&b, "In-process, %s; %s, GOMAXPROCS=%s; `go test -bench -count=%d -benchtime=%s`, %v in all. "+
		"Medians from benchstat with their 95%% confidence interval; \"× floor\" divides by the bare `atomic.Int64.Add` "+
		"of the same column. Parallel runs GOMAXPROCS goroutines on one generator; its ns/op is wall time per ID. "+
		"ids/ms is given for time-based generators, whose cap per worker is 4096 IDs/ms for 41-10-12 layouts "+
		"(about 244 ns/ID) and 25.6 IDs/ms for sonyflake's default; a rate above the cap is a burst borrowed from "+
		"future milliseconds (yitter's drift), repaid later by stalling until the clock catches up.\n\n",
		header(raw, "cpu"), runtime.Version(), s.procs, count, benchtime, took)
	b.WriteString("| generator | ns/op | allocs/op | × floor | parallel ns/op | allocs/op | × floor | ids/ms (single / parallel) |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, gen := range gens {
		single, parallel := "Next/"+gen, "NextParallel/"+gen
		label := gen
		nsUnit, scale := "sec/op", 1.0
		if gen == batchRow {
			// One op is a batch: show it per ID, so that it lines up with
			// the single-ID rows.
			label = fmt.Sprintf("%s (per ID, batches of %d)", gen, batchSize)
			nsUnit, scale = "sec/id", batchSize
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", label,
			ns(s, nsUnit, single), allocs(s, single, scale), ratio(s, nsUnit, single, "Next/"+floor),
			ns(s, "sec/op", parallel), allocs(s, parallel, 1), ratio(s, "sec/op", parallel, "NextParallel/"+floor),
			idsPerMs(s, single, parallel))
	}
	b.WriteString(endMarker + "\n")
	return b.String()
}

// header returns the value of a "key: value" line of go test's output.
func header(raw []byte, key string) string {
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, key+": "); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown " + key
}

func ns(s summary, unit, name string) string {
	st, ok := s.byUnit[unit][name]
	if !ok {
		return "—"
	}
	out := strconv.FormatFloat(st.median*1e9, 'f', decimals(st.median*1e9), 64)
	if strings.HasSuffix(st.ci, "%") {
		out += " ±" + st.ci
	}
	return out
}

// allocs returns allocations per ID: per op divided by the IDs in an op.
func allocs(s summary, name string, idsPerOp float64) string {
	st, ok := s.byUnit["allocs/op"][name]
	if !ok {
		return "—"
	}
	return strconv.FormatFloat(st.median/idsPerOp, 'g', 3, 64)
}

func ratio(s summary, unit, name, floorName string) string {
	st, ok := s.byUnit[unit][name]
	fl, okFloor := s.byUnit["sec/op"][floorName]
	if !ok || !okFloor || fl.median == 0 {
		return "—"
	}
	r := st.median / fl.median
	return strconv.FormatFloat(r, 'f', decimals(r), 64) + "×"
}

func idsPerMs(s summary, single, parallel string) string {
	a, okA := s.byUnit["ids/ms"][single]
	p, okP := s.byUnit["ids/ms"][parallel]
	switch {
	case okA && okP:
		return fmt.Sprintf("%.0f / %.0f", a.median, p.median)
	case okA:
		return fmt.Sprintf("%.0f / —", a.median)
	case okP:
		return fmt.Sprintf("— / %.0f", p.median)
	}
	return ""
}

// decimals keeps about three significant digits.
func decimals(v float64) int {
	switch {
	case v >= 100:
		return 0
	case v >= 10:
		return 1
	default:
		return 2
	}
}

// splice replaces the section between the markers in path with md, which
// carries the markers itself.
func splice(path, md string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	before, rest, ok := strings.Cut(string(doc), beginMarker)
	_, after, ok2 := strings.Cut(rest, endMarker)
	if !ok || !ok2 {
		return fmt.Errorf("%s lacks %s … %s", path, beginMarker, endMarker)
	}
	after = strings.TrimPrefix(after, "\n")
	return os.WriteFile(path, []byte(before+md+after), 0o644)
}
