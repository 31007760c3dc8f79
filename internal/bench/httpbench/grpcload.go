package httpbench

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

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
	clients := make([]idgenv1connect.IDServiceClient, conns)
	for i := range clients {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		// One transport per connection: HTTP/2 puts every call to a host
		// on one connection otherwise.
		t := &http.Transport{Protocols: p}
		defer t.CloseIdleConnections()
		clients[i] = idgenv1connect.NewIDServiceClient(&http.Client{Transport: t}, g.Base, connect.WithGRPC())
	}
	var cpu0 time.Duration
	if g.PID > 0 {
		var err error
		if cpu0, err = ProcessCPU(g.PID); err != nil {
			return WrkResult{}, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, g.Duration)
	defer cancel()
	var ok, failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for i := range streams {
		c := clients[i%conns]
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := c.Next(ctx, connect.NewRequest(g.Request))
				switch {
				case err == nil:
					ok.Add(1)
				case ctx.Err() == nil:
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := WrkResult{Requests: ok.Load(), RPS: float64(ok.Load()) / elapsed.Seconds(), Non2xx: failed.Load()}
	if g.PID > 0 {
		cpu1, err := ProcessCPU(g.PID)
		if err != nil {
			return WrkResult{}, err
		}
		r.CPUSeconds = (cpu1 - cpu0).Seconds()
	}
	return r, nil
}
