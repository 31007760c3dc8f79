package httpbench

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/store/dbtest"
)

// grpcAddrRE finds the grpc-go port in the start-up line of idgen serve
// and of the floor.
var grpcAddrRE = regexp.MustCompile(`grpc_addr=(\S+)`)

// nativeCheckIDs is how many IDs of each run are checked for duplicates.
const nativeCheckIDs = 20000

// nativeTarget is one server of TestLiveGRPCNative.
type nativeTarget struct {
	name string
	base string
	pid  int
	// call, when set, is the server's own API (a peer's); nil calls
	// idgen.v1.IDService/Next.
	call GRPCLoad
}

// TestLiveGRPCNative measures unary idgen.v1.IDService/Next on grpc-go's
// own transport (idgen serve --grpc-addr) beside the floor's bare grpc-go
// handler answering an atomic counter, and the connect-go path on the
// main port beside the floor's bare connect handler, each server in its
// own process, with the server's CPU time read from /proc. Every server
// gets the same load, grpc-go's client over grpcConns connections, and
// the rounds are interleaved: in each round every server runs once, in
// turn. cmd/report renders the JSON it writes.
//
//	go test ./httpbench -run TestLiveGRPCNative -v -args -live.out=DIR
func TestLiveGRPCNative(t *testing.T) {
	out := requireLive(t)
	p := currentPlan()
	dir := t.TempDir()
	floor := proctest.Start(t, buildFloor(t, dir), nil, "-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0")
	idgenBin := proctest.Binary(t, dir)
	idgen := proctest.Serve(t, idgenBin, []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")},
		"--access-log=false", "--grpc-addr", "127.0.0.1:0")
	native := func(proc *proctest.Proc) string {
		m := grpcAddrRE.FindStringSubmatch(proc.Log())
		if m == nil {
			t.Fatalf("no grpc_addr in:\n%s", proc.Log())
		}
		return "http://" + m[1]
	}
	// Pairs of targets, floor first: each pair is a table.
	targets := []nativeTarget{
		{name: "floor: bare grpc-go handler, atomic counter", base: native(floor), pid: floor.PID()},
		{name: "idgen serve --grpc-addr (grpc-go)", base: native(idgen), pid: idgen.PID()},
		{name: "floor: bare connect-go handler on net/http h2c", base: floor.URL, pid: floor.PID()},
		{name: "idgen serve --addr (connect-go)", base: idgen.URL, pid: idgen.PID()},
	}
	if bin := os.Getenv(goLeafEnv); bin != "" {
		// goLeaf needs MySQL; idgen runs beside it on the same server
		// and database, each with its own table (leaf_alloc, id_sequence).
		db := dbtest.Start(t, dbtest.MySQL)
		leafAddr, leafPID := startGoLeaf(t, bin, db)
		onMySQL := proctest.Serve(t, idgenBin, []string{"IDGEN_STORE=" + db.DSN},
			"--access-log=false", "--grpc-addr", "127.0.0.1:0")
		targets = append(targets,
			nativeTarget{name: "goLeaf (kratos on grpc-go), MariaDB", base: "http://" + leafAddr, pid: leafPID, call: GRPCLoad{Call: goLeafCall}},
			nativeTarget{name: "idgen serve --grpc-addr (grpc-go), MariaDB", base: native(onMySQL), pid: onMySQL.PID()})
	} else {
		t.Logf("%s is not set: goLeaf is not measured", goLeafEnv)
	}
	one := &idgenv1.NextRequest{Tag: "order"}
	load := func(tg nativeTarget, streams, round int) WrkResult {
		t.Helper()
		d := p.round
		if round < 0 {
			d = min(p.round, 2e9)
		}
		g := tg.call
		g.Base, g.Conns, g.Streams, g.Duration, g.PID, g.Native, g.CheckIDs = tg.base, grpcConns, streams, d, tg.pid, true, nativeCheckIDs
		if g.Call == nil {
			g.Request = one
		}
		r, err := g.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r.Non2xx > 0 {
			t.Logf("%s, %d streams, round %d: %d failed calls of %d, the first: %s", tg.name, streams, round, r.Non2xx, r.Requests+r.Non2xx, r.FirstError)
		}
		if r.Duplicates > 0 {
			t.Errorf("%s, %d streams, round %d: %d duplicate IDs among %d", tg.name, streams, round, r.Duplicates, r.Checked)
		}
		return r
	}
	for _, tg := range targets {
		load(tg, 64, -1)
	}
	res := GRPCNativeResult{Quick: *liveQuick, LoadAvg: LoadAvg{Start: loadAvg()}, Rounds: p.rounds, Seconds: p.round.Seconds(),
		Conns: grpcConns, CheckIDs: nativeCheckIDs}
	for i := 0; i+1 < len(targets); i += 2 {
		res.Pairs = append(res.Pairs, NativePair{Floor: targets[i].name, Idgen: targets[i+1].name})
	}
	for _, streams := range grpcStreams {
		tps := make([]Throughput, len(res.Pairs))
		for i := range tps {
			tps[i].Conns = streams
		}
		for r := range p.rounds {
			// Every other round runs the targets in reverse (ABBA), so
			// that a load rising or falling across the run weighs on
			// each pair alike.
			order := make([]int, len(targets))
			for i := range order {
				order[i] = i
				if r%2 == 1 {
					order[i] = len(targets) - 1 - i
				}
			}
			for _, i := range order {
				tg := targets[i]
				w := load(tg, streams, r)
				if i%2 == 0 {
					tps[i/2].Floor = append(tps[i/2].Floor, w)
				} else {
					tps[i/2].Idgen = append(tps[i/2].Idgen, w)
				}
				t.Logf("streams %d round %d: %s: %.0f calls/s, %.1f µs CPU/call", streams, r+1, tg.name, w.RPS, w.CPUPerRequest())
			}
		}
		for i := range tps {
			res.Pairs[i].Throughput = append(res.Pairs[i].Throughput, tps[i])
		}
	}
	res.LoadAvg.End = loadAvg()
	writeJSON(t, out, GRPCNativeFile, res)
	t.Log(fmt.Sprintf("load average %v → %v\n", res.LoadAvg.Start, res.LoadAvg.End) + res.Markdown())
}
