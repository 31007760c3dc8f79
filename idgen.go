// Package idgen hands out 64-bit IDs that are unique across every instance
// and roughly increasing in time. It has two strategies behind one
// interface:
//
//   - segment (package segment): ranges reserved in a shared database and
//     handed out from memory, per tag;
//   - snowflake (package snowflake): time, worker and sequence bits, with
//     worker IDs leased from the same database.
//
// Programs depend on Generator and choose a strategy when wiring; the
// HTTP server in package server does the same.
package idgen

import (
	"context"
	"errors"
)

// Generator hands out IDs for a tag. Both *segment.Allocator and the
// snowflake adapter satisfy it. In segment mode the tag selects an
// independent sequence; in snowflake mode it is validated and echoed, but
// does not partition IDs.
type Generator interface {
	// Next returns one ID.
	Next(ctx context.Context, tag string) (int64, error)
	// NextN returns n IDs in increasing order.
	NextN(ctx context.Context, tag string, n int) ([]int64, error)
}

// Errors of bad input shared by every strategy; the strategies' own
// sentinels of the same meaning are these very values, so errors.Is
// matches either name.
var (
	// ErrInvalidTag is returned when a tag is not 1 to 64 characters of
	// [A-Za-z0-9_.:-]. It is checked before any I/O.
	ErrInvalidTag = errors.New("idgen: invalid tag: use 1 to 64 characters of A-Z a-z 0-9 _ . : -")
	// ErrInvalidCount is returned when fewer than one ID is asked for.
	ErrInvalidCount = errors.New("idgen: invalid count: ask for at least one ID")
)
