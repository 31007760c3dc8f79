package httpbench

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
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
}

// WrkResult is what one wrk run reports.
type WrkResult struct {
	Requests int64   `json:"requests"`
	RPS      float64 `json:"rps"`
	// Non2xx counts answers other than 2xx or 3xx; SocketErrors sums
	// wrk's connect, read, write and timeout errors.
	Non2xx       int64 `json:"non2xx"`
	SocketErrors int64 `json:"socket_errors"`
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
		"-d" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"}
	if w.Accept != "" {
		args = append(args, "-H", "Accept: "+w.Accept)
	}
	args = append(args, w.URL)
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "wrk", args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return WrkResult{}, fmt.Errorf("httpbench: wrk %v: %w\n%s%s", args, err, out.Bytes(), stderr.Bytes())
	}
	return parseWrk(out.Bytes())
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
