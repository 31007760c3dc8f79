// Command floor is the HTTP floor for idgen's HTTP benchmarks: a bare gin
// handler that answers GET /id/{tag} with an atomic counter in the same
// JSON idgen writes, {"tag":"order","id":"N"}. It has idgen's gin settings
// (gin.New in release mode, no logging, no redirects) and idgen's
// http.Server (server.NewHTTPServer), so that the gap between the two is
// idgen's own server path: middleware, the allocator and the response.
//
//	floor [-addr 127.0.0.1:0]
//
// It prints "serving addr=HOST:PORT" on stderr once it listens, and stops
// on SIGINT or SIGTERM.
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/server"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := server.NewHTTPServer(addr, handler())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "serving addr=%s\n", ln.Addr())
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

// handler is gin configured as server.New configures it, with one route
// and no middleware.
func handler() http.Handler {
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
