package httpbench

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

func TestParseWrk(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want WrkResult
		err  bool
	}{
		{name: "clean", out: `Running 5s test @ http://127.0.0.1:8080/id/order
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.91ms    2.10ms  30.12ms   88.12%
    Req/Sec    17.23k     1.92k   21.40k    69.00%
  171438 requests in 5.00s, 25.34MB read
Requests/sec:  34270.68
Transfer/sec:      5.07MB
`, want: WrkResult{Requests: 171438, RPS: 34270.68}},
		{name: "errors", out: `  1000 requests in 1.00s, 1.00MB read
  Socket errors: connect 1, read 2, write 3, timeout 4
  Non-2xx or 3xx responses: 17
Requests/sec:   1000.00
`, want: WrkResult{Requests: 1000, RPS: 1000, Non2xx: 17, SocketErrors: 10}},
		{name: "garbage", out: "unable to connect to 127.0.0.1:1 Connection refused\n", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseWrk([]byte(tt.out))
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("parseWrk = %+v, %v; want %+v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 1000; i++ {
		s = append(s, time.Duration(i))
	}
	tests := []struct {
		p    float64
		want time.Duration
	}{{50, 500}, {99, 990}, {99.9, 999}, {100, 1000}, {0.01, 1}}
	for _, tt := range tests {
		if got := Percentile(s, tt.p); got != tt.want {
			t.Errorf("Percentile(1..1000, %v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("Percentile(nil) = %v, want 0", got)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}}
	for _, tt := range tests {
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestReadResponse(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		status int
		keep   bool
		err    bool
	}{
		{"ok", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n{}\r\n", 200, true, false},
		{"close", "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\ncontent-length: 0\r\n\r\n", 503, false, false},
		{"no length", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 0, false, true},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", 0, false, true},
		{"not http", "SSH-2.0-OpenSSH\r\n", 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, keep, err := readResponse(bufio.NewReader(strings.NewReader(tt.in)))
			if (err != nil) != tt.err || status != tt.status || (err == nil && keep != tt.keep) {
				t.Fatalf("readResponse = %d, %v, %v; want %d, %v, error %v", status, keep, err, tt.status, tt.keep, tt.err)
			}
		})
	}
}

// The generator sends every slot once, in order of due time, with the
// header asked for, and counts answers by status. Timing is not checked.
func TestOpenLoop_Run(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/plain" {
			http.Error(w, "no Accept", http.StatusBadRequest)
			return
		}
		if r.URL.Query().Get("fail") != "" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("1"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	tests := []struct {
		path     string
		ok, fail bool
	}{{"/id/order", true, false}, {"/id/order?fail=1", false, true}}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			seen := 0
			o := OpenLoop{Addr: addr, Path: tt.path, Accept: "text/plain", Rate: 200, Duration: 250 * time.Millisecond,
				Conns: 1, OnSample: func(Sample) { seen++ }} // one connection: seen needs no lock
			r, err := o.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			l := r.Summarise(o.Rate)
			if len(r.Samples)+r.Unsent != 50 || seen != len(r.Samples) {
				t.Fatalf("%d samples + %d unsent, %d seen; want 50 slots, all samples seen", len(r.Samples), r.Unsent, seen)
			}
			if (l.OK > 0) != tt.ok || (l.Failed > 0) != tt.fail || l.OK+l.Failed != len(r.Samples) {
				t.Fatalf("OK %d, failed %d", l.OK, l.Failed)
			}
			for i := 1; i < len(r.Samples); i++ {
				if r.Samples[i].Due <= r.Samples[i-1].Due {
					t.Fatalf("samples out of order at %d", i)
				}
			}
		})
	}
}

func TestOpenLoop_Run_Unreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	if _, err := (OpenLoop{Addr: addr, Path: "/", Rate: 10, Duration: time.Second}).Run(context.Background()); err == nil {
		t.Fatal("Run against a closed port: no error")
	}
}

// SlowStore delegates every call, and its wait gives way to the context.
func TestSlowStore(t *testing.T) {
	ctx := context.Background()
	mem := segmenttest.NewMemory()
	s := &SlowStore{Store: mem, Delay: time.Millisecond}
	if err := s.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Reserve(ctx, "order", 0)
	if err != nil || r.Start != 1 || r.End != 11 {
		t.Fatalf("Reserve = %+v, %v; want [1, 11)", r, err)
	}
	if ok, err := s.Release(ctx, "order", 5, 11); err != nil || !ok {
		t.Fatalf("Release = %v, %v; want true", ok, err)
	}
	if _, err := s.Reserve(ctx, "missing", 0); !errors.Is(err, segment.ErrTagNotFound) {
		t.Fatalf("Reserve of a missing tag: %v, want ErrTagNotFound", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	slow := &SlowStore{Store: mem, Delay: time.Hour}
	if _, err := slow.Reserve(cctx, "order", 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reserve with a cancelled context: %v, want context.Canceled", err)
	}
}

// The Recorder sees the allocator's first wait and its loads.
func TestRecorder(t *testing.T) {
	ctx := context.Background()
	mem := segmenttest.NewMemory()
	if err := mem.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder()
	a, err := segment.New(&SlowStore{Store: mem}, segment.Options{Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for range 25 {
		if _, err := a.Next(ctx, "order"); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.Waits()) < 1 || len(rec.Loads()) < 2 {
		t.Fatalf("%d waits, %d loads; want at least the first wait and 2 loads", len(rec.Waits()), len(rec.Loads()))
	}
	rec.Reset(time.Now())
	if len(rec.Waits()) != 0 || len(rec.Loads()) != 0 {
		t.Fatal("Reset kept events")
	}
}

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name, stat string
		want       time.Duration
		err        bool
	}{
		{"plain", "4242 (idgen) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 100 0 0", 3250 * time.Millisecond, false},
		{"spaces and parentheses in the name", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 0 0", 30 * time.Millisecond, false},
		{"truncated", "7 (x) R 1 2 3", 0, true},
		{"no name", "garbage", 0, true},
		{"not numbers", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 a b 0 0 20 0 1 0 5 0 0", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU(tt.stat)
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("parseStatCPU = %v, %v; want %v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

// The CPU time of this very process grows while it works.
func TestProcessCPU(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for {
		for i := range 10_000_000 {
			x ^= i
		}
		now, err := ProcessCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now >= before+30*time.Millisecond {
			break
		}
	}
	if _, err := ProcessCPU(-1); err == nil {
		t.Fatal("ProcessCPU(-1) succeeded")
	}
	_ = x
}
