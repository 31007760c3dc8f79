package httpbench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Wrk configures one run of wrk (https://github.com/wg/wrk), the
// closed-loop load generator that measures maximum throughput: each
// connection sends its next request as soon as the last one is answered.
type Wrk struct {
	URL      string
	Threads  int           // default 2
	Conns    int           // default 64
	Duration time.Duration // default 5s
	Accept   string        // Accept header, if not empty
	// PID, when not zero, is the server's process: Run then reports the
	// CPU time it used during the run.
	PID int
}

// WrkResult is what one wrk run reports.
type WrkResult struct {
	Requests int64   `json:"requests"`
	RPS      float64 `json:"rps"`
	// Non2xx counts answers other than 2xx or 3xx; SocketErrors sums
	// wrk's connect, read, write and timeout errors.
	Non2xx       int64 `json:"non2xx"`
	SocketErrors int64 `json:"socket_errors"`
	// CPUSeconds is the user and system CPU time the server process
	// used while wrk ran (Wrk.PID), 0 if not measured.
	CPUSeconds float64 `json:"cpu_s,omitempty"`
	// Checked counts the IDs whose uniqueness a gRPC run checked (the
	// first GRPCLoad.CheckIDs), Duplicates those seen twice among them.
	Checked    int64 `json:"checked,omitempty"`
	Duplicates int64 `json:"duplicates,omitempty"`
	// FirstError is the first failed gRPC call's error.
	FirstError string `json:"first_error,omitempty"`
}

// CPUPerRequest returns the server's CPU time per request in
// microseconds, or 0 if it was not measured.
func (r WrkResult) CPUPerRequest() float64 {
	if r.Requests == 0 {
		return 0
	}
	return r.CPUSeconds / float64(r.Requests) * 1e6
}

// Run runs wrk and parses its summary.
func (w Wrk) Run(ctx context.Context) (WrkResult, error) {
	threads, conns, d := w.Threads, w.Conns, w.Duration
	if threads <= 0 {
		threads = 2
	}
	if conns <= 0 {
		conns = 64
	}
	if d <= 0 {
		d = 5 * time.Second
	}
	args := []string{"-t" + strconv.Itoa(threads), "-c" + strconv.Itoa(conns),
		// wrk takes whole seconds: "1.8s" is a usage error.
		"-d" + strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))) + "s"}
	if w.Accept != "" {
		args = append(args, "-H", "Accept: "+w.Accept)
	}
	args = append(args, w.URL)
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "wrk", args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	var cpu0 time.Duration
	if w.PID != 0 {
		var err error
		if cpu0, err = ProcessCPU(w.PID); err != nil {
			return WrkResult{}, err
		}
	}
	if err := cmd.Run(); err != nil {
		return WrkResult{}, fmt.Errorf("httpbench: wrk %v: %w\n%s%s", args, err, out.Bytes(), stderr.Bytes())
	}
	r, err := parseWrk(out.Bytes())
	if err != nil || w.PID == 0 {
		return r, err
	}
	cpu1, err := ProcessCPU(w.PID)
	r.CPUSeconds = (cpu1 - cpu0).Seconds()
	return r, err
}

// clockTicks is USER_HZ, the unit of the CPU times in /proc/PID/stat: 100
// on every Linux architecture Go runs on.
const clockTicks = 100

// ProcessCPU returns the user plus system CPU time that process pid has
// used so far, from /proc/PID/stat (Linux only), to 1/100 s.
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("httpbench: CPU time of process %d: %w", pid, err)
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime, the 14th and 15th fields of a
// /proc/PID/stat line. The second field, the command name in parentheses,
// may hold spaces, so fields are counted from its closing parenthesis.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	f := strings.Fields(stat[i+1:])
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("httpbench: unexpected /proc/PID/stat line %q", stat)
	}
	// f[0] is field 3 (state), so utime (14) and stime (15) are f[11], f[12].
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("httpbench: unexpected /proc/PID/stat line %q", stat)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

var (
	wrkRequests = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	wrkRPS      = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkNon2xx   = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses: (\d+)`)
	wrkSocket   = regexp.MustCompile(`(?m)^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

// parseWrk reads wrk's summary.
func parseWrk(out []byte) (WrkResult, error) {
	var r WrkResult
	m := wrkRequests.FindSubmatch(out)
	rps := wrkRPS.FindSubmatch(out)
	if m == nil || rps == nil {
		return r, fmt.Errorf("httpbench: no request count in wrk output:\n%s", out)
	}
	r.Requests, _ = strconv.ParseInt(string(m[1]), 10, 64)
	r.RPS, _ = strconv.ParseFloat(string(rps[1]), 64)
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		r.Non2xx, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := wrkSocket.FindSubmatch(out); m != nil {
		for _, v := range m[1:] {
			n, _ := strconv.ParseInt(string(v), 10, 64)
			r.SocketErrors += n
		}
	}
	return r, nil
}
