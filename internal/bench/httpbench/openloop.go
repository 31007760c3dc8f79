package httpbench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// OpenLoop configures an open-loop load: requests are due at a fixed rate
// whatever the server does, and each is timed from when it was due. Conns
// workers, each with one keep-alive HTTP/1.1 connection, take the due
// slots in order; when all of them are busy, slots are sent late and the
// wait counts in their latency, as it would for real callers.
type OpenLoop struct {
	// Addr is the server's host:port.
	Addr string
	// Path is the request target, such as "/id/order".
	Path string
	// Accept, if not empty, is sent as the Accept header.
	Accept string
	// Rate is the number of requests due per second. Required.
	Rate float64
	// Duration is how long requests fall due. No request is sent after
	// it; slots not sent by then are counted as Unsent. Required.
	Duration time.Duration
	// Conns is the number of connections. Default 32.
	Conns int
	// Timeout bounds each request. Default 10s.
	Timeout time.Duration
	// OnSample, if set, is called with each request as it completes,
	// concurrently from the connections' goroutines; it must be quick.
	OnSample func(Sample)
}

// Sample is one request, its times relative to the start of the run.
type Sample struct {
	Due, Sent, Done time.Duration
	// Status is the HTTP status, or 0 when the request failed without
	// one (connection refused or reset, timeout).
	Status int
}

// Latency is how long the caller waited: from when the request was due
// until the answer arrived.
func (s Sample) Latency() time.Duration { return s.Done - s.Due }

// Lag is how late the generator sent the request.
func (s Sample) Lag() time.Duration { return s.Sent - s.Due }

// Run is the outcome of one open-loop run.
type Run struct {
	Start   time.Time
	Samples []Sample // in order of Due
	// Unsent is the number of slots due within Duration that no
	// connection was free to send before Duration ended.
	Unsent int
}

// Run sends the load and returns every request's times. Cancelling ctx
// ends the run early, without error: the slots not sent are Unsent. It
// returns an error only when it cannot connect at all.
func (o OpenLoop) Run(ctx context.Context) (Run, error) {
	if o.Rate <= 0 || o.Duration <= 0 {
		return Run{}, errors.New("httpbench: OpenLoop needs a positive Rate and Duration")
	}
	conns := o.Conns
	if conns <= 0 {
		conns = 32
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	// Fail early, and warm the path, with one connection.
	c, err := net.DialTimeout("tcp", o.Addr, 5*time.Second)
	if err != nil {
		return Run{}, fmt.Errorf("httpbench: %w", err)
	}
	_ = c.Close()

	req := []byte("GET " + o.Path + " HTTP/1.1\r\nHost: " + o.Addr + "\r\n")
	if o.Accept != "" {
		req = append(req, "Accept: "+o.Accept+"\r\n"...)
	}
	req = append(req, "\r\n"...)

	total := int64(o.Rate * o.Duration.Seconds())
	interval := float64(time.Second) / o.Rate
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each worker claims the next slot, sleeps until it is due and sends
	// it, so a free connection always takes the earliest slot. The sleep
	// is the runtime's timer: when the process is otherwise idle it can
	// wake up to a millisecond late (the scheduler then blocks in
	// epoll_wait, whose timeout is in milliseconds), which shows as Lag.
	var next atomic.Int64
	out := make([][]Sample, conns)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			cl := client{addr: o.Addr, req: req, timeout: timeout}
			defer cl.close()
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				due := time.Duration(float64(i) * interval)
				if i >= total || due >= o.Duration {
					return
				}
				if d := due - time.Since(start); d > 0 {
					timer.Reset(d)
					select {
					case <-timer.C:
					case <-ctx.Done():
						return
					}
				}
				sent := time.Since(start)
				if sent >= o.Duration {
					return
				}
				smp := Sample{Due: due, Sent: sent, Status: cl.do()}
				smp.Done = time.Since(start)
				out[w] = append(out[w], smp)
				if o.OnSample != nil {
					o.OnSample(smp)
				}
			}
		})
	}
	wg.Wait()
	r := Run{Start: start}
	for _, s := range out {
		r.Samples = append(r.Samples, s...)
	}
	sortSamples(r.Samples)
	r.Unsent = int(total) - len(r.Samples)
	return r, nil
}

// client is one keep-alive connection that sends the same GET again and
// again and reads just enough of each answer to find its end.
type client struct {
	addr    string
	req     []byte
	timeout time.Duration
	conn    net.Conn
	r       *bufio.Reader
}

// do sends the request once and returns the status, or 0 on a transport
// error, after which the next call reconnects.
func (c *client) do() int {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.addr, c.timeout)
		if err != nil {
			return 0
		}
		c.conn = conn
		if c.r == nil {
			c.r = bufio.NewReaderSize(conn, 64<<10)
		} else {
			c.r.Reset(conn)
		}
	}
	_ = c.conn.SetDeadline(time.Now().Add(c.timeout))
	if _, err := c.conn.Write(c.req); err != nil {
		c.close()
		return 0
	}
	status, keep, err := readResponse(c.r)
	if err != nil {
		c.close()
		return 0
	}
	if !keep {
		c.close()
	}
	return status
}

func (c *client) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

var (
	headerContentLength = []byte("content-length:")
	headerConnection    = []byte("connection:")
)

// readResponse reads one HTTP/1.1 response with a Content-Length body and
// discards the body. keep is false when the server closes the connection.
func readResponse(r *bufio.Reader) (status int, keep bool, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("httpbench: bad status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, fmt.Errorf("httpbench: bad status line %q", line)
	}
	length := -1
	keep = true
	for {
		line, err = r.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		h := bytes.TrimRight(line, "\r\n")
		if len(h) == 0 {
			break
		}
		lower := bytes.ToLower(h)
		switch {
		case bytes.HasPrefix(lower, headerContentLength):
			length, err = strconv.Atoi(string(bytes.TrimSpace(h[len(headerContentLength):])))
			if err != nil {
				return 0, false, fmt.Errorf("httpbench: bad Content-Length %q", h)
			}
		case bytes.HasPrefix(lower, headerConnection):
			keep = !bytes.Contains(lower, []byte("close"))
		}
	}
	if length < 0 {
		return 0, false, errors.New("httpbench: response without Content-Length")
	}
	if _, err := r.Discard(length); err != nil {
		return 0, false, err
	}
	return status, keep, nil
}
