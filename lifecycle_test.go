package idgen_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/snowflake/snowflaketest"
)

// stopper is the one lifecycle of the generators that hold resources:
// Close with its configured bound, Shutdown with the caller's context.
type stopper interface {
	idgen.Generator
	Close() error
	Shutdown(ctx context.Context) error
}

var (
	_ stopper = (*segment.Allocator)(nil)
	_ stopper = (*snowflake.Leased)(nil)
)

// Both generators stop the same way: Close or Shutdown hands back what
// they hold (the segment's unused rest, the worker lease), later calls
// fail with the package's ErrClosed, and stopping again is harmless.
func TestGenerators_CloseAndShutdown(t *testing.T) {
	newSegment := func(t *testing.T) (stopper, func(*testing.T)) {
		st := segmenttest.NewMemory()
		a, err := segment.New(st, segment.Options{AutoCreate: true})
		if err != nil {
			t.Fatal(err)
		}
		return a, func(t *testing.T) {
			if n := a.Buffered(); n != 0 {
				t.Errorf("a closed allocator still buffers %d IDs", n)
			}
		}
	}
	newLeased := func(t *testing.T) (stopper, func(*testing.T)) {
		st := snowflaketest.NewMemory()
		l, err := snowflake.NewLeased(t.Context(), st, snowflake.LeasedConfig{RenewInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		return l, func(t *testing.T) {
			ws, err := st.Workers(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				if w.Owner != "" {
					t.Errorf("worker %d is still held by %q after the generator stopped", w.WorkerID, w.Owner)
				}
			}
		}
	}
	for _, tc := range []struct {
		name   string
		open   func(*testing.T) (stopper, func(*testing.T))
		closed error
		stop   func(stopper) error
	}{
		{"segment Close", newSegment, segment.ErrClosed, stopper.Close},
		{"segment Shutdown", newSegment, segment.ErrClosed, func(s stopper) error { return s.Shutdown(context.Background()) }},
		{"leased Close", newLeased, snowflake.ErrClosed, stopper.Close},
		{"leased Shutdown", newLeased, snowflake.ErrClosed, func(s stopper) error { return s.Shutdown(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, released := tc.open(t)
			if _, err := g.Next(t.Context(), "order"); err != nil {
				t.Fatal(err)
			}
			if err := tc.stop(g); err != nil {
				t.Fatalf("stop: %v", err)
			}
			released(t)
			if _, err := g.Next(t.Context(), "order"); !errors.Is(err, tc.closed) {
				t.Errorf("Next after stop = %v, want %v", err, tc.closed)
			}
			if err := g.Close(); err != nil {
				t.Errorf("Close again = %v", err)
			}
			if err := g.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown again = %v", err)
			}
		})
	}
}
