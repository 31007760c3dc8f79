// Command orders is the order flow idgen is built for, runnable: an
// order service on gin in which POST /orders
//
//  1. takes an Idempotency-Key through idgen's middleware, so that a
//     retry or a double click gets the first answer back;
//  2. takes the user's lock (package lock), so that one user's orders
//     run one at a time;
//  3. takes the order's ID from idgen (package segment);
//  4. writes the order and an outbox row in one transaction, which the
//     lock's guard admits only with the newest token;
//  5. answers, and the middleware records the answer.
//
// An outbox relay publishes the outbox to a Redis stream, and a consumer
// handles each order once (package dedup) although the relay may
// publish it twice. Without -redis, outbox rows wait for a relay.
//
//	go run ./examples/orders                     # SQLite in ./orders.db, :8081
//	curl -H 'X-User: ann' -H 'Idempotency-Key: k1' -d '{"item":"book","qty":1}' localhost:8081/orders
//	curl localhost:8081/orders/ID                # "shipped": 1 once consumed
//
// Everything lives in idgen's store, which also holds the service's own
// tables: sqlite:// (the default), postgres:// or mysql://.
//
// docker-compose.yml beside this file runs it on PostgreSQL and Redis
// (`docker compose up -d --build` here; see its header), and `orders health`
// is the container's health check, since the image has no curl.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "health" {
		return health(args[1:])
	}
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	addr := fs.String("addr", envOr("ORDERS_ADDR", "127.0.0.1:8081"), "listen address (ORDERS_ADDR)")
	dsn := fs.String("store", envOr("ORDERS_STORE", "sqlite://orders.db"), "idgen store, which also holds the orders: sqlite://PATH, postgres://… or mysql://… (ORDERS_STORE)")
	redis := fs.String("redis", os.Getenv("ORDERS_REDIS"), "Redis address (host:port) for the outbox relay and the consumer; empty: outbox rows wait (ORDERS_REDIS)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s, err := open(ctx, Config{DSN: *dsn, Logger: log})
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	done := make(chan error, 2)
	workers := 0
	if *redis != "" {
		p, err := newPipeline(ctx, s, *redis, log)
		if err != nil {
			return err
		}
		defer p.Close()
		workers = 2
		go func() { done <- p.Relay(ctx) }()
		go func() { done <- p.Consume(ctx, "orders-"+nonce()) }()
	}
	srv := &http.Server{Addr: *addr, Handler: s.routes(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("orders: serving", "addr", *addr, "store", redact(*dsn), "redis", *redis)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	for range workers {
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			log.Error("orders: worker", "err", err)
		}
	}
	return nil
}

// health is `orders health [-addr ADDR] [-url URL]`: it exits 0 if URL
// answers 200 within 3 seconds, else 1. The image (distroless, or
// scratch in CI) has no shell or curl to run a health check with. URL
// defaults to /readyz on the listen address (-addr, else ORDERS_ADDR, as
// the server reads them), so that a container given another ORDERS_ADDR
// is not probed on a port nothing listens on.
func health(args []string) error {
	fs := flag.NewFlagSet("orders health", flag.ContinueOnError)
	addr := fs.String("addr", envOr("ORDERS_ADDR", "127.0.0.1:8081"), "the server's listen address, whose /readyz is probed (ORDERS_ADDR)")
	u := fs.String("url", "", "URL to probe instead (default http://ADDR/readyz)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *u == "" {
		probe, err := probeURL(*addr)
		if err != nil {
			return err
		}
		*u = probe
	}
	if p, err := url.Parse(*u); err != nil || (p.Scheme != "http" && p.Scheme != "https") {
		return fmt.Errorf("health: -url %q is not an http(s) URL", *u)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *u, nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s answered %s", *u, resp.Status)
	}
	return nil
}

// probeURL is the /readyz URL of a server listening on addr. A wildcard
// or empty host is reached on loopback: inside a container that is the
// server's own, and Go's wildcard listener takes IPv4 as well.
func probeURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("health: listen address %q is not host:port", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
