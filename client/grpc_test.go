package client_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/server"
)

// rpcCounter counts the gRPC calls that reach h, by protocol.
type rpcCounter struct {
	h     http.Handler
	calls atomic.Int64
	http2 atomic.Bool
}

func (c *rpcCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/idgen.v1.IDService/") {
		c.calls.Add(1)
		c.http2.Store(r.ProtoMajor == 2 && r.Header.Get("Content-Type") == "application/grpc")
	}
	c.h.ServeHTTP(w, r)
}

// Two servers on one database, four caching allocators over gRPC: no ID
// twice, and every call went over gRPC on HTTP/2.
func TestGRPC_SegmentUniqueAcrossClientsAndServers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.db")
	var counters []*rpcCounter
	var bases []string
	for range 2 {
		ts := startServer(t, path, server.Config{})
		c := &rpcCounter{h: ts.Config.Handler}
		counters = append(counters, c)
		bases = append(bases, serve(t, c).URL)
	}
	checkUniqueAcross(t, []string{bases[0], bases[1], bases[0], bases[1]}, client.WithGRPC())
	for i, c := range counters {
		if c.calls.Load() == 0 || !c.http2.Load() {
			t.Fatalf("server %d: %d gRPC calls, last over HTTP/2 gRPC: %v", i, c.calls.Load(), c.http2.Load())
		}
	}
}

// The same calls and errors over gRPC as over HTTP.
func TestGRPC_PerIDCallsAndErrors(t *testing.T) {
	t.Parallel()
	toks, err := server.ParseAPITokens("client-token-00001=order;client-token-00003=*")
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, filepath.Join(t.TempDir(), "idgen.db"), server.Config{APITokens: toks})
	cnt := &rpcCounter{h: ts.Config.Handler}
	base := serve(t, cnt).URL
	ctx := context.Background()
	c, err := client.New(base, client.WithGRPC(), client.WithMode("segment"), client.WithToken("client-token-00003"))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := c.Next(ctx, "order"); err != nil || id != 1 {
		t.Fatalf("Next = %d, %v; want 1", id, err)
	}
	if ids, err := c.NextN(ctx, "order", 3); err != nil || len(ids) != 3 || ids[0] != 2 || ids[2] != 4 {
		t.Fatalf("NextN = %v, %v; want [2 3 4]", ids, err)
	}
	for _, tc := range []struct {
		name, token, tag string
		n                int
		want             []error
		code             string
	}{
		{"invalid tag", "client-token-00003", "bad tag", 1, []error{idgen.ErrInvalidTag, client.ErrBadRequest, segment.ErrRefused}, "invalid_tag"},
		{"count over the server's max", "client-token-00003", "order", 1_000_000, []error{idgen.ErrInvalidCount, segment.ErrRefused}, "invalid_count"},
		{"no token", "", "order", 1, []error{client.ErrUnauthorized, segment.ErrRefused}, "unauthorized"},
		{"wrong token", "client-token-00002", "order", 1, []error{client.ErrForbidden, segment.ErrRefused}, "forbidden"},
		{"other tag", "client-token-00001", "invoice", 1, []error{client.ErrForbidden, segment.ErrRefused}, "forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Long backoffs: a retry would show as a slow call.
			c, _ := client.New(base, client.WithGRPC(), client.WithToken(tc.token), client.WithMode("segment"),
				client.WithRetries(5), client.WithBackoff(time.Second, 2*time.Second))
			cnt.calls.Store(0)
			start := time.Now()
			_, err := c.NextN(ctx, tc.tag, tc.n)
			var apiErr *client.Error
			if !errors.As(err, &apiErr) || apiErr.Code != tc.code || errors.Is(err, segment.ErrUnavailable) {
				t.Fatalf("err = %v, want code %s and not ErrUnavailable", err, tc.code)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("err = %v does not match %v", err, w)
				}
			}
			if n := cnt.calls.Load(); n != 1 { // not retried, so no backoff slept
				t.Fatalf("%d calls in %v, want 1 and no backoff", n, time.Since(start))
			}
			if tc.tag == "bad tag" || tc.n > 1 {
				return
			}
			alloc, err := c.Segment(segment.Options{MaxBackoff: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer alloc.Close()
			cnt.calls.Store(0)
			for range 5 {
				if _, err := alloc.Next(ctx, tc.tag); !errors.Is(err, tc.want[0]) {
					t.Fatalf("Segment Next: %v, want %v", err, tc.want[0])
				}
			}
			if n := cnt.calls.Load(); n != 1 {
				t.Fatalf("Segment: %d calls for 5 IDs, want 1", n)
			}
		})
	}
}

// UNAVAILABLE with its RetryInfo is retried (the wait capped by the
// client's backoff) and then returned as ErrUnavailable with the code.
func TestGRPC_RetriesUnavailable(t *testing.T) {
	t.Parallel()
	st := segmenttest.NewMemory()
	st.SetError(errors.New("dial tcp: connection refused"))
	alloc, _ := segment.New(st, segment.Options{AutoCreate: true, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	defer alloc.Close()
	h, _ := server.New(server.Config{Segment: alloc, Ranges: alloc})
	cnt := &rpcCounter{h: h}
	ts := serve(t, cnt)
	c, _ := client.New(ts.URL, client.WithGRPC(), client.WithMode("segment"), client.WithRetries(3), client.WithBackoff(time.Millisecond, 5*time.Millisecond))
	start := time.Now()
	_, err := c.Next(context.Background(), "order")
	var apiErr *client.Error
	if !errors.Is(err, segment.ErrUnavailable) || !errors.As(err, &apiErr) || apiErr.Code != "unavailable" || apiErr.Status != 503 {
		t.Fatalf("err = %v, want ErrUnavailable with code unavailable", err)
	}
	if n := cnt.calls.Load(); n != 4 {
		t.Fatalf("%d calls in %v, want 4 (1 + 3 retries)", n, time.Since(start))
	}
	st.SetError(nil)
	if _, err := c.Next(context.Background(), "order"); err != nil {
		t.Fatalf("after the store came back: %v", err)
	}
	dead, _ := client.New("http://127.0.0.1:1", client.WithGRPC(), client.WithRetries(1), client.WithBackoff(time.Millisecond, time.Millisecond))
	if _, err := dead.Next(context.Background(), "order"); !errors.Is(err, segment.ErrUnavailable) {
		t.Fatalf("dead server: err = %v, want ErrUnavailable", err)
	}
}
