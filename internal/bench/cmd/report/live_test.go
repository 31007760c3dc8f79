package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/bench/httpbench"
)

func TestFormats(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{thousands(0), "0"},
		{thousands(999.6), "1,000"},
		{thousands(1234567), "1,234,567"},
		{micros(250.4), "250 µs"},
		{micros(12_345), "12.3 ms"},
		{micros(2_500_000), "2.50 s"},
		{percent(0), "0%"},
		{percent(0.0259), "2.59%"},
		{percent(2.44), "244%"},
		{millions(5_320_000), "5.32 M"},
		{sOrNone(-1), "none"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// Each renderer turns its JSON into a table with the meta line on top.
func TestRender(t *testing.T) {
	m := meta{date: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), cpu: "Test CPU", nproc: 2, goVer: "go1.26",
		command: "cd internal/bench && go run ./cmd/report -all"}
	w := func(rps float64) []httpbench.WrkResult { return []httpbench.WrkResult{{RPS: rps}} }
	tests := []struct {
		name   string
		v      any
		render func([]byte, meta) (string, error)
		want   []string
	}{
		{"http", httpbench.HTTPResult{Rounds: 1, Seconds: 5, Batch: 1000, ThroughputConns: []int{16, 64}, Stores: []httpbench.HTTPStore{{
			Store: "sqlite", Throughput: []httpbench.Throughput{
				{Conns: 16, Floor: []httpbench.WrkResult{{RPS: 40000, Requests: 200000, CPUSeconds: 4}},
					Idgen: []httpbench.WrkResult{{RPS: 38000, Requests: 190000, CPUSeconds: 4.18}}},
				{Conns: 64, Floor: w(40000), Idgen: w(30000)}},
			LatencyRate:  15000,
			IdgenLatency: []httpbench.Latencies{{P50: 200, P99: 1500, P999: 4000}}, FloorLatency: []httpbench.Latencies{{P50: 150}},
			BatchJSON: w(6000), BatchText: w(7000)}},
			Skipped: []httpbench.SkipReason{{Store: "postgres", Reason: "no Docker"}}},
			renderHTTP, []string{"at 16 and 64 connections", "| SQLite | 16 | 40,000 | 38,000 | 0.95 | 0.95–0.95 | 20.0 | 22.0 | 1.10 | 1.10–1.10 |",
				"| SQLite | 64 | 40,000 | 30,000 | 0.75 |", "| idgen, SQLite | 15,000 | 200 µs | 1.5 ms | 4.0 ms |",
				"| SQLite | 6.00 M | 7.00 M |", "PostgreSQL not measured: no Docker."}},
		{"hidden", httpbench.HiddenResult{DelayMS: 100, RowStep: 100, Rate: 2000, Seconds: 30, Store: "postgres",
			Runs: []httpbench.HiddenRun{{Dynamic: true, Requests: 60000, Waits: 120, LastWaitS: 0.2, Loads: 12, LastStep: 204800}}},
			renderHidden, []string{"| dynamic (default) | 60000 | 120 | 0.20% | 0 | 0.20 s |", "at most about 1,000 IDs/s"}},
		{"ride", httpbench.RideThroughResult{Store: "postgres", Rate: 2000, BufferedAtStop: 20000, PredictedS: 10,
			RideThroughS: 9.9, RecoveryS: 0.05, FirstFailureS: 30, FirstSuccessS: 35, LastFailureS: 34.9},
			renderRide, []string{"| **predicted ride-through** (buffered ÷ rate) | **10.00 s** |",
				"| **measured ride-through** (database down → first failure) | **9.90 s** |",
				"| **recovery** (database answering → first ID) | **0.05 s** |"}},
		{"grpcnative", httpbench.GRPCNativeResult{Rounds: 1, Seconds: 5, Conns: 4, CheckIDs: 20000, Pairs: []httpbench.NativePair{{
			Floor: "floor: bare grpc-go", Idgen: "idgen --grpc-addr", Throughput: []httpbench.Throughput{{Conns: 16,
				Floor: []httpbench.WrkResult{{RPS: 20000, Requests: 100000, CPUSeconds: 3, Checked: 20000}},
				Idgen: []httpbench.WrkResult{{RPS: 19000, Requests: 95000, CPUSeconds: 3.42, Checked: 20000}}}}}}},
			renderNative, []string{"over 4 connections", "**idgen --grpc-addr** beside **floor: bare grpc-go**",
				"| 16 | 20,000 | 19,000 | 0.95 | 0.95–0.95 | 30.0 | 36.0 | 1.20 | 1.20–1.20 |",
				"40,000 in all, were checked for duplicates: 0 found. 0 of 195,000 calls failed."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			md, err := tt.render(body, m)
			if err != nil {
				t.Fatal(err)
			}
			want := append([]string{"_Measured 2026-01-02 03:04 UTC on 2 × Test CPU (nproc 2), go1.26"}, tt.want...)
			for _, w := range want {
				if !strings.Contains(md, w) {
					t.Errorf("output lacks %q:\n%s", w, md)
				}
			}
		})
	}
}

func TestSpliceSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	doc := "intro\n<!-- http:begin -->\nold\n<!-- http:end -->\noutro\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := spliceSection(path, httpSection, wrap(httpSection, "new\n"), false); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "intro\n<!-- http:begin -->\nnew\n<!-- http:end -->\noutro\n"; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if err := spliceSection(path, hiddenSection, "x", true); err != nil {
		t.Fatalf("optional section missing: %v", err)
	}
	if err := spliceSection(path, hiddenSection, "x", false); err == nil {
		t.Fatal("required section missing: no error")
	}
}

// -live picks measurements by test name and runs exactly those; a
// pattern that picks none is refused rather than measuring nothing.
func TestSelectLive(t *testing.T) {
	for _, tc := range []struct {
		expr, run string
		files     []string
	}{
		{"", "^(TestLiveHTTP|TestLiveHidden|TestLiveRideThrough|TestLiveGRPC|TestLiveGRPCNative|TestLiveOpaque)$",
			[]string{httpbench.HTTPFile, httpbench.HiddenFile, httpbench.RideThroughFile, httpbench.GRPCFile, httpbench.GRPCNativeFile, httpbench.OpaqueFile}},
		{"GRPC", "^(TestLiveGRPC|TestLiveGRPCNative)$", []string{httpbench.GRPCFile, httpbench.GRPCNativeFile}},
		{"GRPCNative", "^(TestLiveGRPCNative)$", []string{httpbench.GRPCNativeFile}},
		{"HTTP|Hidden", "^(TestLiveHTTP|TestLiveHidden)$", []string{httpbench.HTTPFile, httpbench.HiddenFile}},
	} {
		got, err := selectLive(tc.expr)
		if err != nil {
			t.Fatalf("%q: %v", tc.expr, err)
		}
		var files []string
		for _, lt := range got {
			files = append(files, lt.file)
		}
		if run := runPattern(got); run != tc.run || strings.Join(files, " ") != strings.Join(tc.files, " ") {
			t.Errorf("%q: -run %s, files %v; want %s, %v", tc.expr, run, files, tc.run, tc.files)
		}
	}
	for _, bad := range []string{"gRPC", "("} {
		if _, err := selectLive(bad); err == nil {
			t.Errorf("-live %q accepted", bad)
		}
	}
}
