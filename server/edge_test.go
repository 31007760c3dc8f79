package server_test

import (
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

const (
	edgeAdmin   = "edge-admin-token-0001"
	edgeAPI     = "edge-api-token-00001"
	edgeMetrics = "edge-metrics-token-01"
)

func newEdgeServer(t *testing.T, cfg server.Config) (*httptest.Server, *syncBuffer) {
	t.Helper()
	st := openStore(t)
	m := server.NewMetrics()
	alloc := newAllocator(t, st, segment.Options{AutoCreate: true, Observer: m})
	var logs syncBuffer
	cfg.Segment, cfg.Admin, cfg.Metrics = alloc, st, m
	cfg.Logger, cfg.AccessLog = slog.New(slog.NewTextHandler(&logs, nil)), true
	h, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts, &logs
}

func TestServer_Edge(t *testing.T) {
	t.Parallel()
	ts, _ := newEdgeServer(t, server.Config{AdminToken: edgeAdmin, MetricsToken: edgeMetrics,
		APITokens: server.APITokens{edgeAPI: {"*"}}})
	for _, tc := range []struct {
		name, path, token string
		status            int
		code              string
	}{
		{"metrics without a token", "/metrics", "", 401, "unauthorized"},
		{"metrics with the admin token", "/metrics", edgeAdmin, 403, "forbidden"},
		{"metrics with its token", "/metrics", edgeMetrics, 200, ""},
		{"IDs with an API token", "/id/order", edgeAPI, 200, ""},
		{"IDs with the admin token", "/id/order", edgeAdmin, 403, "forbidden"},
		{"admin with an API token", "/admin/tags", edgeAPI, 403, "forbidden"},
		{"admin with its token", "/admin/tags", edgeAdmin, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, "GET", ts.URL+tc.path, tc.token, "")
			if a.status != tc.status || (tc.code != "" && errCode(t, a.body) != tc.code) {
				t.Fatalf("got %d %s, want %d %s", a.status, a.body, tc.status, tc.code)
			}
		})
	}
}

// X-Forwarded-For is believed only from the proxies configured.
func TestServer_TrustedProxies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		proxies []string
		remote  string
	}{
		{"none by default", nil, "remote=127.0.0.1\n"},
		{"loopback proxy", []string{"127.0.0.0/8"}, "remote=203.0.113.9\n"},
		{"another proxy", []string{"10.0.0.0/8"}, "remote=127.0.0.1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, logs := newEdgeServer(t, server.Config{TrustedProxies: tc.proxies})
			do(t, "GET", ts.URL+"/id/order", "", "", "X-Forwarded-For", "203.0.113.9")
			if !strings.Contains(logs.String(), tc.remote) {
				t.Fatalf("access log lacks %q:\n%s", tc.remote, logs.String())
			}
		})
	}
}

func TestNew_RejectsWeakTokensAndBadProxies(t *testing.T) {
	t.Parallel()
	short := strings.Repeat("x", server.MinTokenLength-1)
	for _, cfg := range []server.Config{
		{AdminToken: short},
		{MetricsToken: short},
		{APITokens: server.APITokens{short: {"*"}}},
		{AdminToken: edgeAdmin, APITokens: server.APITokens{edgeAdmin: {"*"}}},
		{TrustedProxies: []string{"10.0.0.0/33"}},
	} {
		cfg.Segment = failing{}
		if _, err := server.New(cfg); err == nil {
			t.Errorf("New accepted %+v", cfg)
		}
	}
	if _, err := server.ParseAPITokens(short + "=*"); err == nil {
		t.Errorf("ParseAPITokens accepted a %d-character token", len(short))
	}
}

// Every Config New cannot use is an ErrInvalidConfig that names what to
// change.
func TestNew_InvalidConfig(t *testing.T) {
	t.Parallel()
	short := strings.Repeat("x", server.MinTokenLength-1)
	for _, tc := range []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"no segment generator", server.Config{}, "Segment is required"},
		{"unknown mode", server.Config{Segment: failing{}, Mode: "bogus"}, "Mode must be"},
		{"mode without its generator", server.Config{Segment: failing{}, Mode: server.ModeSnowflake}, "needs its generator"},
		{"negative MaxBatch", server.Config{Segment: failing{}, MaxBatch: -1}, "MaxBatch"},
		{"short admin token", server.Config{Segment: failing{}, AdminToken: short}, "AdminToken"},
		{"short API token", server.Config{Segment: failing{}, APITokens: server.APITokens{short: {"*"}}}, "API tokens"},
		{"admin token as API token", server.Config{Segment: failing{}, AdminToken: edgeAdmin, APITokens: server.APITokens{edgeAdmin: {"*"}}}, "admin token"},
		{"bad proxy", server.Config{Segment: failing{}, TrustedProxies: []string{"10.0.0.0/33"}}, "TrustedProxies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := server.New(tc.cfg)
			if !errors.Is(err, server.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || s != nil {
				t.Fatalf("New = %v, %v; want ErrInvalidConfig naming %s", s, err, tc.want)
			}
		})
	}
}
