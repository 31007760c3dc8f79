package httpbench

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/internal/proctest"
)

// grpcAddrRE finds the grpc-go port in the start-up line of idgen serve
// and of the floor.
var grpcAddrRE = regexp.MustCompile(`grpc_addr=(\S+)`)

// TestLiveGRPCNative measures unary idgen.v1.IDService/Next on grpc-go's
// own transport (idgen serve --grpc-addr) beside the floor's bare grpc-go
// handler answering an atomic counter, and the connect-go path on the
// main port beside the floor's bare connect handler, rounds interleaved,
// each server in its own process, with the server's CPU time read from
// /proc. It logs the table docs/benchmarks.md quotes.
//
//	go test ./httpbench -run TestLiveGRPCNative -v -args -live.out=DIR
func TestLiveGRPCNative(t *testing.T) {
	_ = requireLive(t)
	p := currentPlan()
	dir := t.TempDir()
	floor := proctest.Start(t, buildFloor(t, dir), nil, "-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0")
	idgen := proctest.Serve(t, proctest.Binary(t, dir), []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")},
		"--access-log=false", "--grpc-addr", "127.0.0.1:0")
	native := func(proc *proctest.Proc) string {
		m := grpcAddrRE.FindStringSubmatch(proc.Log())
		if m == nil {
			t.Fatalf("no grpc_addr in:\n%s", proc.Log())
		}
		return "http://" + m[1]
	}
	type target struct {
		name string
		base string
		pid  int
	}
	targets := []target{
		{"floor: bare grpc-go handler, atomic counter", native(floor), floor.PID()},
		{"idgen serve --grpc-addr (grpc-go)", native(idgen), idgen.PID()},
		{"floor: bare connect-go handler on net/http h2c", floor.URL, floor.PID()},
		{"idgen serve --addr (connect-go)", idgen.URL, idgen.PID()},
	}
	one := &idgenv1.NextRequest{Tag: "order"}
	load := func(tg target, streams int, round int) WrkResult {
		d := p.round
		if round < 0 {
			d = min(p.round, 2e9)
		}
		r, err := GRPCLoad{Base: tg.base, Conns: grpcConns, Streams: streams, Duration: d, Request: one, PID: tg.pid}.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r.Non2xx > 0 {
			t.Logf("%s, %d streams, round %d: %d failed calls of %d", tg.name, streams, round, r.Non2xx, r.Requests)
		}
		return r
	}
	for _, tg := range targets {
		load(tg, 64, -1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| server | streams | calls/s | server CPU µs/call | calls/s ÷ its floor | CPU ÷ its floor |\n|---|--:|--:|--:|--:|--:|\n")
	for _, streams := range grpcStreams {
		res := make([][]WrkResult, len(targets))
		for r := range p.rounds {
			for i, tg := range targets {
				res[i] = append(res[i], load(tg, streams, r))
			}
		}
		rps := make([]float64, len(targets))
		cpu := make([]float64, len(targets))
		for i := range targets {
			rps[i] = median(res[i], func(w WrkResult) float64 { return w.RPS })
			cpu[i] = median(res[i], WrkResult.CPUPerRequest)
		}
		for i, tg := range targets {
			f := i &^ 1 // the floor of each pair
			fmt.Fprintf(&b, "| %s | %d | %.0f | %.1f | %.2f | %.2f |\n", tg.name, streams, rps[i], cpu[i], rps[i]/rps[f], cpu[i]/cpu[f])
		}
	}
	t.Logf("load average %v; medians of %d rounds of %v, %d connections\n%s", loadAvg(), p.rounds, p.round, grpcConns, b.String())
}
