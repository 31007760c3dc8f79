package main

// The live sections of the report: idgen over HTTP against the floor, the
// database hidden behind the buffers, and the ride-through of an outage.
// They are measured by the TestLive… functions of ./httpbench, which write
// JSON into results/, and rendered here into results/*.md and, with
// -docs, into their marked sections of the document.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/idgen/idgen/internal/bench/httpbench"
)

// Markers of the sections this file writes. inprocess-meta sits just above
// the in-process table and says when, where and how it was measured; it is
// optional, so that -docs still works on documents without it.
var (
	inprocessMeta = section{"inprocess-meta", ""}
	httpSection   = section{"http", "http.md"}
	hiddenSection = section{"hidden", "hidden.md"}
	rideSection   = section{"ridethrough", "ridethrough.md"}
	grpcSection   = section{"grpc", "grpc.md"}
	nativeSection = section{"grpcnative", "grpcnative.md"}
	opaqueSection = section{"opaque", "opaque.md"}
)

type section struct{ name, file string }

func (s section) begin() string { return "<!-- " + s.name + ":begin -->" }
func (s section) end() string   { return "<!-- " + s.name + ":end -->" }

// liveFlags are the flags this file adds to the report.
type liveFlags struct {
	all, quick *bool
	only       *string
}

func registerLiveFlags() *liveFlags {
	return &liveFlags{
		all: flag.Bool("all", false, "also run the live measurements of ./httpbench: HTTP through wrk and an open-loop "+
			"generator, the database hidden behind a 100 ms delay, an outage ride-through, and gRPC beside a bare connect handler (needs wrk, and Docker or "+
			"IDGEN_TEST_POSTGRES_DSN), and render their tables"),
		quick: flag.Bool("quick", false, "short runs everywhere, to try the report out: -count 1 -benchtime 20ms unless "+
			"given, and 1-second live runs; every table says it came from a quick run"),
		only: flag.String("live", "", "run only the live measurements whose test name matches this regular expression "+
			"(TestLiveGRPC and TestLiveGRPCNative for -live GRPC, TestLiveGRPCNative alone for -live Native) and rewrite only their tables, without the in-process benchmarks; implies -all"),
	}
}

// inProcess says whether the in-process benchmarks run: not when -live
// picks some live measurements alone.
func (l *liveFlags) inProcess() bool { return *l.only == "" }

// liveTest is a live measurement: the TestLive… function of ./httpbench,
// the JSON file it writes and the section rendered from it.
type liveTest struct {
	test, file string
	s          section
	render     func([]byte, meta) (string, error)
}

var liveTests = []liveTest{
	{"TestLiveHTTP", httpbench.HTTPFile, httpSection, renderHTTP},
	{"TestLiveHidden", httpbench.HiddenFile, hiddenSection, renderHidden},
	{"TestLiveRideThrough", httpbench.RideThroughFile, rideSection, renderRide},
	{"TestLiveGRPC", httpbench.GRPCFile, grpcSection, renderGRPC},
	{"TestLiveGRPCNative", httpbench.GRPCNativeFile, nativeSection, renderNative},
	{"TestLiveOpaque", httpbench.OpaqueFile, opaqueSection, renderOpaque},
}

// selectLive returns the live measurements whose test name matches
// expr, all of them for "". A pattern matching none is an error, so that
// a typo does not pass as a run that measured nothing.
func selectLive(expr string) ([]liveTest, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("-live: %w", err)
	}
	var out []liveTest
	for _, lt := range liveTests {
		if re.MatchString(lt.test) {
			out = append(out, lt)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-live %q matches none of the live measurements", expr)
	}
	return out, nil
}

// runPattern is go test's -run for tests: exactly their names.
func runPattern(tests []liveTest) string {
	names := make([]string, len(tests))
	for i, lt := range tests {
		names[i] = lt.test
	}
	return "^(" + strings.Join(names, "|") + ")$"
}

// adjust applies -quick to the in-process flags not given explicitly.
func (l *liveFlags) adjust(count *int, benchtime *string) {
	if !*l.quick {
		return
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["count"] {
		*count = 1
	}
	if !set["benchtime"] {
		*benchtime = "20ms"
	}
}

// meta says when, where and how a table was measured.
type meta struct {
	date    time.Time
	cpu     string
	nproc   int
	goVer   string
	command string
	quick   bool
}

func newMeta(quick bool) meta {
	return meta{date: time.Now().UTC(), cpu: cpuModel(), nproc: runtime.NumCPU(), goVer: runtime.Version(),
		command: "cd internal/bench && go run ./cmd/report " + strings.Join(os.Args[1:], " "), quick: quick}
}

func (m meta) line(load *httpbench.LoadAvg) string {
	s := fmt.Sprintf("Measured %s on %d × %s (nproc %d), %s", m.date.Format("2006-01-02 15:04 UTC"), m.nproc, m.cpu,
		m.nproc, m.goVer)
	if load != nil && load.Start >= 0 {
		s += fmt.Sprintf(", load average %.1f at the start and %.1f at the end", load.Start, load.End)
	}
	s += "; command `" + strings.TrimSpace(m.command) + "`."
	if m.quick {
		s += " **Quick run: too short to quote.**"
	}
	return "_" + s + "_\n"
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// run adds the in-process table's meta line to docs when they ran, then,
// with -all or -live, runs the live measurements and renders them.
func (l *liveFlags) run(ctx context.Context, m meta, docs string) error {
	if docs != "" && l.inProcess() {
		if err := spliceSection(docs, inprocessMeta, wrap(inprocessMeta, m.line(nil)), true); err != nil {
			return err
		}
	}
	if !*l.all && *l.only == "" {
		return nil
	}
	tests, err := selectLive(*l.only)
	if err != nil {
		return err
	}
	dir, err := moduleDir(ctx)
	if err != nil {
		return err
	}
	results := filepath.Join(dir, "results")
	for _, lt := range tests {
		if err := os.Remove(filepath.Join(results, lt.file)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}

	start := time.Now()
	args := []string{"test", "-run", runPattern(tests), "-count=1", "-v", "-timeout=40m", "./httpbench", "-args", "-live.out=" + results}
	if *l.quick {
		args = append(args, "-live.quick")
	}
	test := exec.CommandContext(ctx, "go", args...)
	test.Dir = dir
	test.Stdout, test.Stderr = os.Stderr, os.Stderr
	if err := test.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	fmt.Fprintf(os.Stderr, "report: live measurements took %v\n", time.Since(start).Round(time.Second))

	for _, r := range tests {
		body, err := os.ReadFile(filepath.Join(results, r.file))
		var md string
		switch {
		case errors.Is(err, fs.ErrNotExist):
			md = m.line(nil) + "\nNot measured: the test was skipped (see the go test output above).\n"
		case err != nil:
			return err
		default:
			if md, err = r.render(body, m); err != nil {
				return fmt.Errorf("%s: %w", r.file, err)
			}
		}
		md = wrap(r.s, md)
		fmt.Print(md)
		if err := os.WriteFile(filepath.Join(results, r.s.file), []byte(md), 0o644); err != nil {
			return err
		}
		if docs != "" {
			if err := spliceSection(docs, r.s, md, false); err != nil {
				return err
			}
		}
	}
	return nil
}

func wrap(s section, md string) string { return s.begin() + "\n" + md + s.end() + "\n" }

// spliceSection replaces what lies between s's markers in path with md,
// which carries the markers itself. A document without the markers is an
// error unless optional.
func spliceSection(path string, s section, md string, optional bool) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	before, rest, ok := strings.Cut(string(doc), s.begin())
	_, after, ok2 := strings.Cut(rest, s.end())
	if !ok || !ok2 {
		if optional {
			return nil
		}
		return fmt.Errorf("%s lacks %s … %s", path, s.begin(), s.end())
	}
	after = strings.TrimPrefix(after, "\n")
	return os.WriteFile(path, []byte(before+md+after), 0o644)
}

func renderGRPC(body []byte, m meta) (string, error) {
	var r httpbench.GRPCResult
	if err := json.Unmarshal(body, &r); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(m.line(&r.LoadAvg))
	fmt.Fprintf(&b, "\nUnary `idgen.v1.IDService/Next` of the idgen binary (`idgen serve --access-log=false`, SQLite) beside "+
		"the floor's bare connect-go handler of the same service (`internal/bench/cmd/floor`: `Next` answers an atomic counter, "+
		"with idgen's http.Server and compression threshold), both cleartext HTTP/2. The load is a closed-loop Go "+
		"generator (`httpbench.GRPCLoad`, the connect-go client over %d connections), on the same cores. Every figure is "+
		"a median over %d rounds of %s each, rounds alternating floor, idgen…; the ratio is the median of each round's "+
		"idgen ÷ floor. *CPU µs/call* is the server process's user and system CPU time over the calls it answered.\n\n",
		r.Conns, r.Rounds, secs(r.Seconds))
	b.WriteString(r.Markdown())
	return b.String(), nil
}

func renderNative(body []byte, m meta) (string, error) {
	var r httpbench.GRPCNativeResult
	if err := json.Unmarshal(body, &r); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(m.line(&r.LoadAvg))
	fmt.Fprintf(&b, "\nUnary `idgen.v1.IDService/Next` on `idgen serve --grpc-addr` (grpc-go's own server and transport) beside the "+
		"floor's bare grpc-go handler answering an atomic counter (`internal/bench/cmd/floor -grpc-addr`), and the connect-go path on "+
		"the main port (`--addr`) beside the floor's bare connect-go handler on net/http h2c. Each server runs in its own process "+
		"(idgen on SQLite, `--access-log=false`). Every server gets the same load: a closed-loop grpc-go client "+
		"(`httpbench.GRPCLoad` with `Native`, one `grpc.ClientConn` per connection) over %d connections, on the same cores. "+
		"Every figure is a median over %d rounds of %s each; in every round each server runs once, in turn, in reverse order "+
		"every other round, and the ratio is the "+
		"median of each round's idgen ÷ floor. *CPU µs/call* is the server process's user and system CPU time (from "+
		"/proc/PID/stat) over the calls it answered.\n\n", r.Conns, r.Rounds, secs(r.Seconds))
	if len(r.Pairs) > 2 {
		b.WriteString("The last table puts idgen beside a peer rather than a floor: goLeaf (github.com/younglifestyle/goLeaf, " +
			"a Go port of Meituan Leaf serving gRPC through kratos on grpc-go's transport), built outside this repository " +
			"from a fetched copy and named by `IDGEN_BENCH_GOLEAF`, in segment mode on a MariaDB container, beside idgen on " +
			"the same server, both with a new tag of step 1000 (goLeaf's `GenSegmentId`, idgen's `Next`); its *floor* " +
			"columns are goLeaf's.\n\n")
	}
	b.WriteString(r.Markdown())
	return b.String(), nil
}

func renderOpaque(body []byte, m meta) (string, error) {
	var r httpbench.OpaqueResult
	if err := json.Unmarshal(body, &r); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(m.line(&r.LoadAvg))
	fmt.Fprintf(&b, "\nGET /id/{tag} of one idgen binary (`idgen serve --access-log=false`, SQLite, an AES-256 opaque key) on "+
		"a plain and an opaque tag, both created with step 100,000, through wrk on the same cores. Both tags are served "+
		"by one process, so the ratio is the opaque tag's own cost: its FF1 encryptions and the 19-digit numbers they "+
		"write. Every figure is a median over %d rounds of %s each, rounds alternating plain, opaque…; the ratio is the "+
		"median of each round's opaque ÷ plain. The batch rows are one request at a time (wrk -c1).\n\n", r.Rounds, secs(r.Seconds))
	b.WriteString(r.Markdown())
	return b.String(), nil
}

func renderHTTP(body []byte, m meta) (string, error) {
	var r httpbench.HTTPResult
	if err := json.Unmarshal(body, &r); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(m.line(&r.LoadAvg))
	fmt.Fprintf(&b, "\nThe idgen binary (`idgen serve --access-log=false`, its defaults otherwise: metrics, request IDs, "+
		"snowflake routes on) and the floor (`internal/bench/cmd/floor`: a bare gin handler returning an atomic counter as the "+
		"same JSON, with idgen's gin and http.Server settings) run side by side on this machine, with the load "+
		"generators on the same cores. Every figure is a median over %d rounds of %s each; in each round floor and "+
		"idgen run one after the other, idgen first every other round (floor, idgen, idgen, floor…), and the ratio is the "+
		"median of each round's idgen ÷ floor.\n\n", r.Rounds, secs(r.Seconds))

	fmt.Fprintf(&b, "**Maximum throughput**, `GET /id/order`, `wrk -t%d`, at %s connections. *CPU µs/req* is the "+
		"user and system CPU time the server process used during a round (from /proc/PID/stat), divided by the "+
		"requests it answered: the cost of a request, steadier than the rate on a busy machine.\n\n",
		r.WrkThreads, joinInts(r.ThroughputConns, " and "))
	b.WriteString("| store | conns | floor req/s | idgen req/s | idgen ÷ floor | ratio range | floor CPU µs/req | idgen CPU µs/req | CPU idgen ÷ floor | ratio range |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range r.Stores {
		for _, tp := range s.Throughput {
			var rps, cpu []float64
			for i := range min(len(tp.Floor), len(tp.Idgen)) {
				if tp.Floor[i].RPS > 0 {
					rps = append(rps, tp.Idgen[i].RPS/tp.Floor[i].RPS)
				}
				if f := tp.Floor[i].CPUPerRequest(); f > 0 {
					cpu = append(cpu, tp.Idgen[i].CPUPerRequest()/f)
				}
			}
			rlo, rhi := minMax(rps)
			clo, chi := minMax(cpu)
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %.2f | %.2f–%.2f | %.1f | %.1f | %.2f | %.2f–%.2f |\n", storeName(s.Store),
				tp.Conns, thousands(medianRPS(tp.Floor)), thousands(medianRPS(tp.Idgen)), httpbench.Median(rps), rlo, rhi,
				medianCPU(tp.Floor), medianCPU(tp.Idgen), httpbench.Median(cpu), clo, chi)
		}
	}

	fmt.Fprintf(&b, "\n**Latency at half of idgen's maximum**, open loop: %d connections take requests that fall due "+
		"at a fixed rate and each is timed from when it was due, so a stall counts in full (wrk, closed-loop, would send "+
		"less during a stall and hide it). The floor gets the same rate. Percentiles are medians over the rounds; "+
		"*lag p99* is how late the generator itself sent (its own error, part of every figure), *unsent* the requests "+
		"it never got to send, summed over the rounds.\n\n", r.LatencyConns)
	b.WriteString("| server | req/s | p50 | p99 | p99.9 | max | unsent | failed | lag p99 |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range r.Stores {
		for _, row := range []struct {
			name string
			ls   []httpbench.Latencies
		}{{"idgen, " + storeName(s.Store), s.IdgenLatency}, {"floor, same rate", s.FloorLatency}} {
			pick := func(f func(httpbench.Latencies) float64) string {
				var vs []float64
				for _, l := range row.ls {
					vs = append(vs, f(l))
				}
				return micros(httpbench.Median(vs))
			}
			unsent, failed := 0, 0
			for _, l := range row.ls {
				unsent += l.Unsent
				failed += l.Failed
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d | %d | %s |\n", row.name, thousands(s.LatencyRate),
				pick(func(l httpbench.Latencies) float64 { return l.P50 }),
				pick(func(l httpbench.Latencies) float64 { return l.P99 }),
				pick(func(l httpbench.Latencies) float64 { return l.P999 }),
				pick(func(l httpbench.Latencies) float64 { return l.Max }),
				unsent, failed,
				pick(func(l httpbench.Latencies) float64 { return l.LagP99 }))
		}
	}

	fmt.Fprintf(&b, "\n**Batches**, `GET /id/order?count=%d`, `wrk -t%d -c%d`, as JSON and with `Accept: text/plain`; "+
		"the target is 5 million IDs/s:\n\n", r.Batch, r.WrkThreads, r.BatchConns)
	b.WriteString("| store | JSON IDs/s | text IDs/s |\n|---|--:|--:|\n")
	for _, s := range r.Stores {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", storeName(s.Store),
			millions(medianRPS(s.BatchJSON)*float64(r.Batch)), millions(medianRPS(s.BatchText)*float64(r.Batch)))
	}

	var notes []string
	for _, s := range r.Stores {
		var non2xx, sock int64
		sets := [][]httpbench.WrkResult{s.BatchJSON, s.BatchText}
		for _, tp := range s.Throughput {
			sets = append(sets, tp.Floor, tp.Idgen)
		}
		for _, set := range sets {
			for _, w := range set {
				non2xx += w.Non2xx
				sock += w.SocketErrors
			}
		}
		if non2xx > 0 || sock > 0 {
			notes = append(notes, fmt.Sprintf("%s: wrk saw %d non-2xx answers and %d socket errors.", storeName(s.Store), non2xx, sock))
		}
	}
	for _, sk := range r.Skipped {
		notes = append(notes, fmt.Sprintf("%s not measured: %s.", storeName(sk.Store), sk.Reason))
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, " ") + "\n")
	}
	return b.String(), nil
}

func renderHidden(body []byte, m meta) (string, error) {
	var r httpbench.HiddenResult
	if err := json.Unmarshal(body, &r); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(m.line(&r.LoadAvg))
	fmt.Fprintf(&b, "\nThe real server package in process, over loopback HTTP, on %s behind a store wrapper that sleeps "+
		"%s before every reservation (`httpbench.SlowStore`). One tag with a row step of %d; an open-loop load of "+
		"%s req/s for %s over %d connections, after one request that loads the first segment (every caller waits "+
		"for that one, whatever the step). *Waits* counts `segment.Observer.WaitedForLoad` calls; a request can wait "+
		"more than once when the segment it waited for is used up before its turn, so *waits ÷ answered* can pass 100%%. "+
		"*Slow* counts requests that spent at least %s in the server, which only a wait on a load takes. Latency is "+
		"from when each request was due.\n\n",
		storeName(r.Store), millis(r.DelayMS), r.RowStep, thousands(r.Rate), secs(r.Seconds), r.Conns, millis(r.DelayMS/2))
	b.WriteString("| step | answered | waits | waits ÷ answered | waits after 1 s | last wait | slow | loads | last step | p50 | p99 | p99.9 | failed | unsent |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, run := range r.Runs {
		name := "fixed (`FixedStep: true`)"
		if run.Dynamic {
			name = "dynamic (default)"
		}
		last := "none"
		if run.LastWaitS >= 0 {
			last = fmt.Sprintf("%.2f s", run.LastWaitS)
		}
		perReq := 0.0
		if run.Requests > 0 {
			perReq = float64(run.Waits) / float64(run.Requests)
		}
		l := run.Latencies
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %d | %s | %d | %d | %d | %s | %s | %s | %d | %d |\n", name, run.Requests,
			run.Waits, percent(perReq), run.WaitsAfter1s, last, run.Slow, run.Loads, run.LastStep,
			micros(l.P50), micros(l.P99), micros(l.P999), l.Failed, l.Unsent)
	}
	fmt.Fprintf(&b, "\nA fixed step of %d with a %s store can serve at most about %s IDs/s (one step per load), "+
		"below the offered %s req/s, so that run is overloaded: requests queue behind loads and the backlog grows for "+
		"as long as the load lasts (a request that waits in the server longer than the allocator's WaitTimeout, 3 s, "+
		"fails with 503). The dynamic step doubles while segments last less than 15 minutes, "+
		"so after a few loads each segment outlasts the load of the next.\n",
		r.RowStep, millis(r.DelayMS), thousands(float64(r.RowStep)/(r.DelayMS/1000)), thousands(r.Rate))
	return b.String(), nil
}

func renderRide(body []byte, m meta) (string, error) {
	var r httpbench.RideThroughResult
	if err := json.Unmarshal(body, &r); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(m.line(&r.LoadAvg))
	fmt.Fprintf(&b, "\nThe real server package in process, over loopback HTTP, on %s with the allocator's defaults "+
		"(row step 1000, dynamic step). An open-loop load of %s req/s runs for %s, then the database container is "+
		"stopped (dbtest Stop), kept down until requests fail and 2 s more, and started again (dbtest Restart). A "+
		"probe opens a fresh connection every 50 ms to time when the database really went down and came back. "+
		"Times are seconds since the load began.\n\n", storeName(r.Store), thousands(r.Rate), secs(r.WarmupS))
	loading := ""
	if r.LoadingAtStop {
		loading = " (a load was in flight)"
	}
	ride := fmt.Sprintf("%.2f s", r.RideThroughS)
	if r.Capped {
		ride = fmt.Sprintf("more than %.2f s (IDs still flowing when the outage was ended)", r.RestartCalledS-r.DBDownS)
	}
	rows := [][2]string{
		{"dynamic step when the stop was issued", strconv.FormatInt(r.StepAtStop, 10)},
		{"IDs buffered then (rest of the current segment + the next)", strconv.FormatInt(r.BufferedAtStop, 10) + loading},
		{"rate served over the 5 s before", fmt.Sprintf("%s IDs/s", thousands(r.ServedRate))},
		{"**predicted ride-through** (buffered ÷ rate)", fmt.Sprintf("**%.2f s**", r.PredictedS)},
		{"stop issued / database down (probe) / stop returned", fmt.Sprintf("%.2f / %.2f / %.2f", r.StopCalledS, r.DBDownS, r.StopReturnedS)},
		{"first failed request", sOrNone(r.FirstFailureS)},
		{"**measured ride-through** (database down → first failure)", "**" + ride + "**"},
		{"IDs served while the database was down", strconv.Itoa(r.IDsDuringOutage)},
		{"restart issued / database answering (probe)", fmt.Sprintf("%.2f / %.2f", r.RestartCalledS, r.DBUpS)},
		{"first ID after the failures / last failed request", sOrNone(r.FirstSuccessS) + " / " + sOrNone(r.LastFailureS)},
		{"**recovery** (database answering → first ID)", "**" + sOrNone(r.RecoveryS) + "**"},
		{"requests answered / failed", fmt.Sprintf("%d / %d", r.Requests-r.Failed, r.Failed)},
	}
	b.WriteString("| | |\n|---|--:|\n")
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
	return b.String(), nil
}
