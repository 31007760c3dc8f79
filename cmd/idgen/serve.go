package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/spf13/cobra"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

func newServe() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve IDs over HTTP",
		Args:  cobra.NoArgs,
		RunE:  runServe,
	}
	f := cmd.Flags()
	f.String("addr", ":8080", "listen address")
	f.Bool("auto-create-tags", true, "create a tag on its first use (turn off in production to refuse typos)")
	f.Int64("default-step", 1000, "step of auto-created tags")
	f.Int("max-batch", 10000, "largest ?count= accepted")
	f.Int64("max-range", 1_000_000, "largest ?size= of POST /segment/{tag}/range")
	f.Bool("migrate", true, "apply schema migrations at start")
	f.String("mode", server.ModeSegment, "strategy behind /id/{tag}: segment or snowflake")
	f.Duration("shutdown-timeout", 10*time.Second, "how long to drain requests and hand back ranges on SIGTERM")
	f.String("log-format", "text", "log format: text or json")
	f.Bool("access-log", true, "log every request")
	f.String("admin-token", "", "bearer token for /admin/* (without it /admin/* answers 403)")
	f.String("api-tokens", "", "client tokens for the ID endpoints: a file path, or inline TOKEN=tag1,tag2;TOKEN2=*")
	return cmd
}

func runServe(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	addr, _ := f.GetString("addr")
	autoCreate, _ := f.GetBool("auto-create-tags")
	defaultStep, _ := f.GetInt64("default-step")
	maxBatch, _ := f.GetInt("max-batch")
	maxRange, _ := f.GetInt64("max-range")
	migrate, _ := f.GetBool("migrate")
	mode, _ := f.GetString("mode")
	drain, _ := f.GetDuration("shutdown-timeout")
	logFormat, _ := f.GetString("log-format")
	accessLog, _ := f.GetBool("access-log")
	adminToken, _ := f.GetString("admin-token")

	log, err := newLogger(logFormat)
	if err != nil {
		return err
	}
	apiTokens, err := loadAPITokens(f.Lookup("api-tokens").Value.String())
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	st, err := openStore(ctx, storeDSN(cmd))
	if err != nil {
		return err
	}
	defer st.Close()
	if migrate {
		v, err := st.Migrate(ctx, nil)
		if err != nil {
			return err
		}
		log.Info("schema ready", "version", v)
	}

	metrics := server.NewMetrics()
	alloc, err := segment.New(st, &segment.Options{AutoCreate: autoCreate, DefaultStep: defaultStep, Logger: log, Observer: metrics})
	if err != nil {
		return err
	}
	gin.SetMode(gin.ReleaseMode)
	h, err := server.New(server.Config{
		Segment:    alloc,
		Mode:       mode,
		MaxBatch:   maxBatch,
		Ready:      st.Ping,
		Logger:     log,
		AccessLog:  accessLog,
		Admin:      st,
		Stats:      alloc,
		Ranges:     alloc,
		MaxRange:   maxRange,
		AdminToken: adminToken,
		APITokens:  apiTokens,
		Metrics:    metrics,
	})
	if err != nil {
		_ = alloc.Close()
		return err
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = alloc.Close()
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := server.NewHTTPServer(addr, h)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String(), "store", redact(storeDSN(cmd)), "mode", mode)

	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("shutting down", "timeout", drain)
	}
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	// Drain requests first, then hand back what they did not use.
	if e := srv.Shutdown(sctx); e != nil {
		log.Warn("drain incomplete", "err", e)
	}
	if e := alloc.Shutdown(sctx); e != nil {
		log.Warn("hand-back incomplete", "err", e)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

func newLogger(format string) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, nil)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

// loadAPITokens reads --api-tokens: a file when the value names one,
// otherwise the inline form.
func loadAPITokens(v string) (server.APITokens, error) {
	if v == "" {
		return nil, nil
	}
	if b, err := os.ReadFile(v); err == nil {
		v = string(b)
	}
	return server.ParseAPITokens(v)
}
