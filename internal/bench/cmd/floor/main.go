// Command floor is the floor for idgen's HTTP and gRPC benchmarks: a bare
// gin handler that answers GET /id/{tag} with an atomic counter in the
// same JSON idgen writes, {"tag":"order","id":"N"}, and a bare connect-go
// handler of idgen.v1.IDService whose Next answers one ID from a counter
// (its other methods are unimplemented). It has idgen's gin settings
// (gin.New in release mode, no logging, no redirects), idgen's split of
// gRPC paths from the rest, and idgen's http.Server
// (server.NewHTTPServer, HTTP/1.1 and cleartext HTTP/2), so that the gap
// between the two is idgen's own server path: middleware or interceptors,
// the allocator and the response.
//
// With -grpc-addr it also serves, on grpc-go's own server and transport,
// a bare handler of idgen.v1.IDService/Next answering the same counter:
// the floor of idgen serve --grpc-addr. With -lock-redis as well, that
// server also answers idgen.v1.LockService's Acquire and Release with one
// Redis command each on that redis-server (lock.go): the floor of idgen's
// locks over grpc-go.
//
//	floor [-addr 127.0.0.1:0] [-grpc-addr 127.0.0.1:0] [-lock-redis HOST:PORT]
//
// It prints "serving addr=HOST:PORT grpc_addr=HOST:PORT" on stderr once it
// listens, and stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/server"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	grpcAddr := flag.String("grpc-addr", "", "listen address of the bare grpc-go server (default: off)")
	lockRedis := flag.String("lock-redis", "", "redis-server address of the grpc-go server's bare idgen.v1.LockService (default: off)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *grpcAddr, *lockRedis); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, grpcAddr, lockRedis string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var n atomic.Int64
	srv := server.NewHTTPServer(addr, handler(&n))
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	native := "off"
	if grpcAddr != "" {
		gln, err := net.Listen("tcp", grpcAddr)
		if err != nil {
			return err
		}
		gs := grpc.NewServer()
		idgenv1.RegisterIDServiceServer(gs, floorGRPC{n: &n})
		if lockRedis != "" {
			rdb := redis.NewClient(&redis.Options{Addr: lockRedis})
			defer func() { _ = rdb.Close() }()
			if err := rdb.Ping(ctx).Err(); err != nil {
				return err
			}
			idgenv1.RegisterLockServiceServer(gs, floorLocks{rdb: rdb})
		}
		defer gs.Stop()
		go func() { errc <- gs.Serve(gln) }()
		native = gln.Addr().String()
	}
	fmt.Fprintf(os.Stderr, "serving addr=%s grpc_addr=%s\n", ln.Addr(), native)
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// handler sends gRPC calls to the bare connect handler, as server.Server
// sends them to its own, and the rest to gin.
func handler(n *atomic.Int64) http.Handler {
	// idgen's compression threshold: without it connect-go gzips every
	// answer, and the floor would spend most of its time there.
	prefix, rpc := idgenv1connect.NewIDServiceHandler(floorRPC{n: n}, connect.WithCompressMinBytes(server.RPCCompressMinBytes))
	web := ginHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, prefix) {
			rpc.ServeHTTP(w, r)
			return
		}
		web.ServeHTTP(w, r)
	})
}

// floorRPC answers Next with the next value of a counter, whatever the
// request asks.
type floorRPC struct {
	idgenv1connect.UnimplementedIDServiceHandler
	n *atomic.Int64
}

func (f floorRPC) Next(_ context.Context, req *connect.Request[idgenv1.NextRequest]) (*connect.Response[idgenv1.NextResponse], error) {
	return connect.NewResponse(&idgenv1.NextResponse{Tag: req.Msg.GetTag(), Ids: []int64{f.n.Add(1)}}), nil
}

// ginHandler is gin configured as server.New configures it, with one
// route and no middleware.
func ginHandler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	var n atomic.Int64
	e.GET("/id/:tag", func(c *gin.Context) {
		tag := c.Param("tag")
		b := make([]byte, 0, 32+len(tag)+22)
		b = append(b, `{"tag":"`...)
		b = append(b, tag...)
		b = append(b, `","id":"`...)
		b = strconv.AppendInt(b, n.Add(1), 10)
		b = append(b, `"}`...)
		c.Data(http.StatusOK, "application/json", b)
	})
	return e
}

// floorGRPC is idgen.v1.IDService for grpc-go with Next only, answering
// the counter through the generated handler, with no interceptor.
type floorGRPC struct {
	idgenv1.UnimplementedIDServiceServer
	n *atomic.Int64
}

func (f floorGRPC) Next(_ context.Context, in *idgenv1.NextRequest) (*idgenv1.NextResponse, error) {
	return &idgenv1.NextResponse{Tag: in.GetTag(), Ids: []int64{f.n.Add(1)}}, nil
}
