package httpbench

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
)

// GRPCLoad is a closed-loop gRPC load generator, wrk's counterpart for
// unary idgen.v1.IDService/Next: Streams callers, spread over Conns
// cleartext HTTP/2 connections, each sending the next call as soon as the
// last one is answered, for Duration. wrk cannot speak gRPC, and a load
// generator in Go built on the same connect-go client is the same for
// idgen and the floor, which is what a ratio needs.
type GRPCLoad struct {
	// Base is the server's base URL, http://host:port.
	Base string
	// Conns HTTP/2 connections carry Streams concurrent calls between
	// them. Defaults 4 and 64.
	Conns, Streams int
	Duration       time.Duration
	// Request is the message of every call.
	Request *idgenv1.NextRequest
	// PID, when set, is the server process whose CPU time is measured.
	PID int
	// Native sends the calls with grpc-go's client (grpc.NewClient, one
	// ClientConn per connection) rather than connect-go's over net/http:
	// the client gRPC deployments use, and a lighter one, so that less of
	// the shared cores goes to the load.
	Native bool
	// Call, when set, replaces idgen.v1.IDService/Next with another
	// unary call over grpc-go (a peer's API), returning the ID it got;
	// it implies Native.
	Call func(ctx context.Context, cc *grpc.ClientConn) (int64, error)
	// CheckIDs is how many IDs, the first ones answered, are checked for
	// duplicates (WrkResult.Checked, Duplicates); 0 checks none.
	CheckIDs int
}

// errNoID is an answer without an ID, counted as a failed call.
var errNoID = errors.New("answer without an ID")

// callers returns one function per connection that makes a call and
// returns the first ID of its answer, and a function that closes them.
func (g GRPCLoad) callers(conns int) ([]func(context.Context) (int64, error), func(), error) {
	out := make([]func(context.Context) (int64, error), conns)
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for i := range out {
		if !g.Native && g.Call == nil {
			p := new(http.Protocols)
			p.SetUnencryptedHTTP2(true)
			// One transport per connection: HTTP/2 puts every call to a
			// host on one connection otherwise.
			t := &http.Transport{Protocols: p}
			closers = append(closers, t.CloseIdleConnections)
			c := idgenv1connect.NewIDServiceClient(&http.Client{Transport: t}, g.Base, connect.WithGRPC())
			out[i] = func(ctx context.Context) (int64, error) {
				res, err := c.Next(ctx, connect.NewRequest(g.Request))
				if err != nil {
					return 0, err
				}
				if len(res.Msg.GetIds()) == 0 {
					return 0, errNoID
				}
				return res.Msg.GetIds()[0], nil
			}
			continue
		}
		cc, err := grpc.NewClient(strings.TrimPrefix(g.Base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, func() { _ = cc.Close() })
		if g.Call != nil {
			out[i] = func(ctx context.Context) (int64, error) { return g.Call(ctx, cc) }
			continue
		}
		out[i] = func(ctx context.Context) (int64, error) {
			res := new(idgenv1.NextResponse)
			if err := cc.Invoke(ctx, idgenv1connect.IDServiceNextProcedure, g.Request, res); err != nil {
				return 0, err
			}
			if len(res.GetIds()) == 0 {
				return 0, errNoID
			}
			return res.GetIds()[0], nil
		}
	}
	return out, closeAll, nil
}

// Run runs the load and returns what wrk would: calls, calls/s, failed
// calls (in Non2xx) and the server's CPU time.
func (g GRPCLoad) Run(ctx context.Context) (WrkResult, error) {
	conns, streams := g.Conns, g.Streams
	if conns <= 0 {
		conns = 4
	}
	if streams <= 0 {
		streams = 64
	}
	callers, closeAll, err := g.callers(conns)
	if err != nil {
		return WrkResult{}, err
	}
	defer closeAll()
	var cpu0 time.Duration
	if g.PID > 0 {
		var err error
		if cpu0, err = ProcessCPU(g.PID); err != nil {
			return WrkResult{}, err
		}
	}
	// The run ends by cancelling, not by a deadline: a deadline travels
	// with every call (grpc-timeout), and the server's copy of it ends
	// the calls in flight a moment before the client's does, which would
	// count them as failures.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.AfterFunc(g.Duration, cancel)
	defer stop.Stop()
	var ok, failed atomic.Int64
	// The first CheckIDs IDs are kept and checked under a lock; once
	// they are in, checking stops, so that the rest of the run measures
	// the servers and not this map.
	var checking atomic.Bool
	checking.Store(g.CheckIDs > 0)
	var mu sync.Mutex
	seen := make(map[int64]struct{}, g.CheckIDs)
	var dups int64
	var firstErr error
	check := func(id int64) {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) >= g.CheckIDs {
			return
		}
		if _, dup := seen[id]; dup {
			dups++
			return
		}
		seen[id] = struct{}{}
		if len(seen) >= g.CheckIDs {
			checking.Store(false)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range streams {
		call := callers[i%conns]
		wg.Go(func() {
			for ctx.Err() == nil {
				id, err := call(ctx)
				switch {
				case err == nil:
					ok.Add(1)
					if checking.Load() {
						check(id)
					}
				case ctx.Err() == nil:
					if failed.Add(1) == 1 {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := WrkResult{Requests: ok.Load(), RPS: float64(ok.Load()) / elapsed.Seconds(), Non2xx: failed.Load()}
	if firstErr != nil {
		r.FirstError = firstErr.Error()
	}
	if g.CheckIDs > 0 {
		mu.Lock()
		r.Checked, r.Duplicates = int64(len(seen))+dups, dups
		mu.Unlock()
	}
	if g.PID > 0 {
		cpu1, err := ProcessCPU(g.PID)
		if err != nil {
			return WrkResult{}, err
		}
		r.CPUSeconds = (cpu1 - cpu0).Seconds()
	}
	return r, nil
}
