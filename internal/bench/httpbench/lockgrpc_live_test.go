package httpbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/store/dbtest"
)

// LockGRPCFile is the raw output of TestLiveLockGRPC, in Go's benchmark
// format for benchstat.
const LockGRPCFile = "lockgrpc.txt"

// lockStreams are the concurrent callers of TestLiveLockGRPC; each has a
// lock name of its own, so that every acquire finds its lock free.
var lockStreams = []int{1, 4}

// lockPairs returns the call of GRPCLoad for one run: an uncontended
// Acquire (no wait) and Release of one lock name over grpc-go, the name
// taken from a pool of one per stream so that no two callers share a
// name. Every run has names of its own (run), so that a grant left by a
// call cancelled at the end of the last run does not block this one.
func lockPairs(run string, streams int) func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
	names := make(chan string, streams)
	for i := range streams {
		names <- fmt.Sprintf("bench-%s-%d", run, i)
	}
	ttl := durationpb.New(10 * time.Second)
	return func(ctx context.Context, cc *grpc.ClientConn) (int64, error) {
		name := <-names
		defer func() { names <- name }()
		acq := new(idgenv1.AcquireResponse)
		if err := cc.Invoke(ctx, idgenv1.LockService_Acquire_FullMethodName,
			&idgenv1.AcquireRequest{Name: name, Owner: name, Ttl: ttl}, acq); err != nil {
			return 0, err
		}
		tok := acq.GetGrant().GetToken()
		if err := cc.Invoke(ctx, idgenv1.LockService_Release_FullMethodName,
			&idgenv1.ReleaseRequest{Name: name, Owner: name, Token: tok}, new(idgenv1.ReleaseResponse)); err != nil {
			return 0, err
		}
		return tok, nil
	}
}

// TestLiveLockGRPC measures an uncontended idgen.v1.LockService Acquire
// (wait unset) and Release of one lock name per caller on grpc-go's
// transport: idgen serve --grpc-addr with its grants on SQLite, on the
// floor's Redis (--lock-store) and on PostgreSQL (when
// IDGEN_TEST_POSTGRES_DSN names one) beside the floor's bare grpc-go
// handler that does one Redis SET NX PX per Acquire and one EVALSHA
// compare-and-delete per Release, on a redis-server spawned on loopback
// (cmd/floor -lock-redis). Each server is a process of its own, measured
// alike: its user and system CPU time from /proc over the pairs it
// answered, under the same closed-loop grpc-go client (GRPCLoad). The
// rounds are interleaved, in reverse order every other round. It writes
// lockgrpc.txt (benchstat's input) and logs the ratio table.
//
//	go test ./httpbench -run TestLiveLockGRPC -v -timeout 30m -args -live.out=DIR
func TestLiveLockGRPC(t *testing.T) {
	out := requireLive(t)
	p := currentPlan()
	if s := os.Getenv("LOCKGRPC_ROUNDS"); s != "" {
		_, _ = fmt.Sscan(s, &p.rounds)
	}
	dir := t.TempDir()
	redisAddr := dbtest.StartRedis(t)
	floor := proctest.Start(t, buildFloor(t, dir), nil, "-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-lock-redis", redisAddr)
	idgenBin := proctest.Binary(t, dir)
	native := func(proc *proctest.Proc) string {
		m := grpcAddrRE.FindStringSubmatch(proc.Log())
		if m == nil {
			t.Fatalf("no grpc_addr in:\n%s", proc.Log())
		}
		return "http://" + m[1]
	}
	type target struct {
		key  string // the benchmark name's server=
		name string
		base string
		pid  int
	}
	targets := []target{{"floor", "floor: bare grpc-go, Redis SET NX PX + EVALSHA delete", native(floor), floor.PID()}}
	sqlite := proctest.Serve(t, idgenBin, []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")},
		"--access-log=false", "--grpc-addr", "127.0.0.1:0")
	targets = append(targets, target{"idgen-sqlite", "idgen serve --grpc-addr, SQLite", native(sqlite), sqlite.PID()})
	// Grants in the floor's own Redis (--lock-store): the same work in
	// Redis, so that the difference is idgen's server.
	rds := proctest.Serve(t, idgenBin, []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen-redis.db"), "IDGEN_LOCK_STORE=redis://" + redisAddr},
		"--access-log=false", "--grpc-addr", "127.0.0.1:0")
	targets = append(targets, target{"idgen-redis", "idgen serve --grpc-addr --lock-store redis://", native(rds), rds.PID()})
	if os.Getenv("IDGEN_TEST_POSTGRES_DSN") != "" {
		pg := proctest.Serve(t, idgenBin, []string{"IDGEN_STORE=" + dbtest.Start(t, dbtest.Postgres).DSN},
			"--access-log=false", "--grpc-addr", "127.0.0.1:0")
		targets = append(targets, target{"idgen-postgres", "idgen serve --grpc-addr, PostgreSQL", native(pg), pg.PID()})
	} else {
		t.Log("IDGEN_TEST_POSTGRES_DSN is not set: idgen on PostgreSQL is not measured")
	}
	for _, tg := range targets {
		t.Logf("%s: pid %d, %s", tg.key, tg.pid, tg.base)
	}
	var runs atomic.Int64
	load := func(tg target, streams int, d time.Duration) WrkResult {
		t.Helper()
		run := fmt.Sprintf("%d-%d", time.Now().UnixNano(), runs.Add(1))
		g := GRPCLoad{Base: tg.base, Conns: min(streams, 4), Streams: streams, Duration: d, PID: tg.pid, Native: true,
			Call: lockPairs(run, streams)}
		r, err := g.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r.Non2xx > 0 {
			t.Errorf("%s, %d streams: %d failed pairs of %d, the first: %s", tg.name, streams, r.Non2xx, r.Requests+r.Non2xx, r.FirstError)
		}
		return r
	}
	for _, tg := range targets {
		load(tg, 4, min(p.round, 2*time.Second)) // warm-up
	}
	var raw strings.Builder
	fmt.Fprintf(&raw, "# TestLiveLockGRPC %s, load average %.2f at the start\n", time.Now().UTC().Format(time.RFC3339), loadAvg())
	fmt.Fprintf(&raw, "goos: linux\ngoarch: amd64\npkg: github.com/idgen/idgen/internal/bench/httpbench\n")
	// res[streams][target] holds one result per round.
	res := make(map[int][][]WrkResult)
	for _, streams := range lockStreams {
		res[streams] = make([][]WrkResult, len(targets))
		for r := range p.rounds {
			for j := range targets {
				i := j
				if r%2 == 1 {
					i = len(targets) - 1 - j
				}
				tg := targets[i]
				w := load(tg, streams, p.round)
				res[streams][i] = append(res[streams][i], w)
				wall := float64(streams) / w.RPS * 1e9 // ns per pair, as one caller sees it
				fmt.Fprintf(&raw, "BenchmarkLockGRPC/streams=%d/server=%s \t%d\t%.0f ns/op\t%.1f cpu-µs/op\t%.0f pairs/s\n",
					streams, tg.key, w.Requests, wall, w.CPUPerRequest(), w.RPS)
				t.Logf("streams %d round %d: %s: %.0f pairs/s, %.1f µs CPU/pair", streams, r+1, tg.name, w.RPS, w.CPUPerRequest())
			}
		}
	}
	fmt.Fprintf(&raw, "# load average %.2f at the end\n", loadAvg())
	if err := os.WriteFile(filepath.Join(out, LockGRPCFile), []byte(raw.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The ratios: each round's idgen ÷ the same round's floor, median and
	// range over the rounds.
	var md strings.Builder
	md.WriteString("| streams | server | pairs/s | wall µs/pair | CPU µs/pair | CPU ÷ floor | range | wall ÷ floor | range |\n|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, streams := range lockStreams {
		fl := res[streams][0]
		for i, tg := range targets {
			var rps, wall, cpu, cr, wr []float64
			for r, w := range res[streams][i] {
				rps = append(rps, w.RPS)
				wall = append(wall, float64(streams)/w.RPS*1e6)
				cpu = append(cpu, w.CPUPerRequest())
				cr = append(cr, w.CPUPerRequest()/fl[r].CPUPerRequest())
				wr = append(wr, fl[r].RPS/w.RPS)
			}
			ratio := func(v []float64) (string, string) {
				if i == 0 {
					return "1", ""
				}
				return fmt.Sprintf("**%.2f**", Median(v)), fmt.Sprintf("%.2f–%.2f", minOf(v), maxOf(v))
			}
			c, crange := ratio(cr)
			wm, wrange := ratio(wr)
			fmt.Fprintf(&md, "| %d | %s | %s | %.0f (%.0f–%.0f) | %.1f (%.1f–%.1f) | %s | %s | %s | %s |\n", streams, tg.name,
				thousands(Median(rps)), Median(wall), minOf(wall), maxOf(wall), Median(cpu), minOf(cpu), maxOf(cpu), c, crange, wm, wrange)
		}
	}
	if err := os.WriteFile(filepath.Join(out, "lockgrpc.md"), []byte(md.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + md.String())
}
