package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/snowflake/snowflaketest"
)

// Retry-After, and gRPC's RetryInfo, come from the error when it knows
// its delay (a RetryAfter method), and are one second when it does not.
// Every clock here is fixed, so each delay is exact.
func TestServer_RetryAfterFromTheError(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	snowflakeAt := func(t *testing.T, cfg snowflake.Config, then func(*snowflake.Generator, *snowflaketest.Clock)) server.Config {
		clock := snowflaketest.NewClock(t0)
		cfg.Clock = clock
		g, err := snowflake.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if then != nil {
			then(g, clock)
		}
		return server.Config{Segment: failing{}, Snowflake: snowflake.NewTagged(g), Mode: server.ModeSnowflake}
	}
	for _, tc := range []struct {
		name  string
		cfg   func(t *testing.T) server.Config
		code  string
		after string        // Retry-After
		delay time.Duration // RetryInfo
	}{
		{"store down, delay unknown", func(*testing.T) server.Config { return server.Config{Segment: failing{}} },
			"unavailable", "1", time.Second},
		{"segment store in backoff", func(t *testing.T) server.Config {
			alloc := newAllocator(t, failingStore{}, segment.Options{AutoCreate: true, MinBackoff: 7 * time.Second,
				MaxBackoff: time.Minute, Now: func() time.Time { return t0 }})
			return server.Config{Segment: alloc}
		}, "unavailable", "7", 7 * time.Second},
		{"worker floor ahead", func(t *testing.T) server.Config {
			return snowflakeAt(t, snowflake.Config{WorkerID: 1, NotBefore: t0.Add(90 * time.Second)}, nil)
		}, "worker_floor_ahead", "90", 90 * time.Second},
		{"clock moved backwards", func(t *testing.T) server.Config {
			return snowflakeAt(t, snowflake.Config{WorkerID: 1}, func(g *snowflake.Generator, c *snowflaketest.Clock) {
				if _, err := g.Next(); err != nil {
					t.Fatal(err)
				}
				c.StepWall(-42 * time.Second)
			})
		}, "clock_moved_backwards", "42", 42 * time.Second},
		{"a part of a second rounds up", func(t *testing.T) server.Config {
			return snowflakeAt(t, snowflake.Config{WorkerID: 1, NotBefore: t0.Add(2500 * time.Millisecond)}, nil)
		}, "worker_floor_ahead", "3", 2500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := server.New(tc.cfg(t))
			if err != nil {
				t.Fatal(err)
			}
			base := serveH2(t, h)
			a := do(t, "GET", base+"/id/order", "", "")
			if a.status != 503 || errCode(t, a.body) != tc.code || a.header.Get("Retry-After") != tc.after {
				t.Fatalf("HTTP: %d %s with Retry-After %q, want 503 %s with %q", a.status, a.body, a.header.Get("Retry-After"), tc.code, tc.after)
			}
			c := idgenv1connect.NewIDServiceClient(h2c(), base, connect.WithGRPC())
			_, err = c.Next(context.Background(), connect.NewRequest(&idgenv1.NextRequest{Tag: "order"}))
			if code, retry, _ := idgenCode(t, err); code != tc.code || retry != tc.delay {
				t.Fatalf("gRPC: %v (reason %q, RetryInfo %v), want %s after %v", err, code, retry, tc.code, tc.delay)
			}
		})
	}
}
