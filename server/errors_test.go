package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/snowflake"
)

// syncBuffer is a log sink that tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A failing store's text, which holds what an attacker wants, must reach
// the log under the request ID and never the caller.
func TestServer_ServerErrorsKeepTheCauseInTheLog(t *testing.T) {
	t.Parallel()
	const secret = "failed to connect to user=idgen database=prod: 10.1.2.3:5432: password authentication failed"
	st := segmenttest.NewMemory()
	st.SetError(errors.New(secret))
	alloc := newAllocator(t, st, segment.Options{AutoCreate: true, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	var logs syncBuffer
	h, err := server.New(server.Config{
		Segment: alloc, Ranges: alloc, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Ready: func(context.Context) error { return errors.New(secret) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/id/order", 503, "unavailable"},
		{"GET", "/segment/order?count=3", 503, "unavailable"},
		{"POST", "/segment/order/range?size=10", 503, "unavailable"},
		{"GET", "/readyz", 503, "not_ready"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			a := do(t, tc.method, ts.URL+tc.path, "", "")
			var body struct {
				Error struct {
					Code, Message string
					RequestID     string `json:"request_id"`
				}
			}
			if err := json.Unmarshal([]byte(a.body), &body); err != nil || a.status != tc.status || body.Error.Code != tc.code {
				t.Fatalf("got %d %s, want %d %s", a.status, a.body, tc.status, tc.code)
			}
			rid := a.header.Get("X-Request-ID")
			if body.Error.RequestID == "" || body.Error.RequestID != rid {
				t.Fatalf("body request_id %q, header %q", body.Error.RequestID, rid)
			}
			for _, leak := range []string{"10.1.2.3", "password", "prod", "segment:"} {
				if strings.Contains(a.body, leak) {
					t.Fatalf("body leaks %q: %s", leak, a.body)
				}
			}
			if !strings.Contains(body.Error.Message, "retry") && !strings.Contains(body.Error.Message, "log") {
				t.Fatalf("message says nothing to do: %q", body.Error.Message)
			}
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "request_id="+rid) {
					line = l
				}
			}
			if !strings.Contains(line, "10.1.2.3:5432: password authentication failed") {
				t.Fatalf("no log line with request_id=%s and the cause:\n%s", rid, logs.String())
			}
		})
	}
}

// Unknown tags, tags past the cap and snowflake names are the caller's
// business: client errors, and no series of their own.
func TestMetrics_CallersCannotAddSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	if err := st.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1, Step: 100}); err != nil {
		t.Fatal(err)
	}
	m := server.NewMetrics()
	alloc := newAllocator(t, st, segment.Options{Observer: m, MaxTags: 1})
	sf, err := snowflake.New(snowflake.Config{WorkerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.New(server.Config{Segment: alloc, Snowflake: snowflake.NewTagged(sf), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	if a := do(t, "GET", ts.URL+"/id/order", "", ""); a.status != 200 {
		t.Fatalf("/id/order = %d %s", a.status, a.body)
	}
	for _, name := range []string{"any", "name", "at", "all"} {
		if a := do(t, "GET", ts.URL+"/snowflake/"+name, "", ""); a.status != 200 {
			t.Fatalf("/snowflake/%s = %d %s", name, a.status, a.body)
		}
	}
	if a := do(t, "GET", ts.URL+"/id/ghost", "", ""); a.status != 409 || errCode(t, a.body) != "tag_limit_reached" ||
		!strings.Contains(a.body, "--max-tags") {
		t.Fatalf("/id/ghost past the cap = %d %s, want 409 tag_limit_reached naming --max-tags", a.status, a.body)
	}
	// Below the cap, an unknown tag is a 404 and no store error.
	alloc2 := newAllocator(t, st, segment.Options{Observer: m})
	h2, err := server.New(server.Config{Segment: alloc2, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ts2 := httptest.NewServer(h2)
	defer ts2.Close()
	if a := do(t, "GET", ts2.URL+"/id/typo", "", ""); a.status != 404 || errCode(t, a.body) != "tag_not_found" {
		t.Fatalf("/id/typo = %d %s", a.status, a.body)
	}
	for _, method := range []string{"BREW", "WHEN", "X-1"} {
		do(t, method, ts.URL+"/id/order", "", "")
	}
	body := do(t, "GET", ts.URL+"/metrics", "", "").body
	if !strings.Contains(body, `method="other"`) {
		t.Error(`/metrics lacks method="other" for made-up methods`)
	}
	for _, bad := range []string{`tag="ghost"`, `tag="typo"`, `tag="any"`, `"BREW"`, `"WHEN"`, `idgen_store_errors_total{op="reserve"} 1`} {
		if strings.Contains(body, bad) {
			t.Errorf("/metrics has %s", bad)
		}
	}
	for _, want := range []string{
		`idgen_client_errors_total{code="tag_limit_reached"} 1`,
		`idgen_client_errors_total{code="tag_not_found"} 1`,
		`idgen_ids_issued_total{mode="segment",tag="order"} 1`,
		`idgen_ids_issued_total{mode="snowflake",tag=""} 4`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
