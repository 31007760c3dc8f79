package snowflake

import (
	"context"
	"fmt"

	"github.com/idgen/idgen"
)

// Tagged adapts a Generator to idgen.Generator, for a program that
// configures the worker ID itself rather than leasing one (Leased has the
// same methods). The tag is checked with idgen.CheckTag, so that both
// strategies refuse the same input, and otherwise ignored: every tag
// shares one sequence of IDs.
type Tagged struct{ g *Generator }

// NewTagged returns an idgen.Generator that issues IDs from g.
func NewTagged(g *Generator) *Tagged { return &Tagged{g: g} }

// Next returns a new ID from the generator. It returns an error wrapping
// idgen.ErrInvalidTag for an invalid tag before anything else, ctx's error
// if ctx is already done, and otherwise what Generator.Next returns. ctx
// does not bound Generator.Next's wait, which is at most MaxBackward.
func (t *Tagged) Next(ctx context.Context, tag string) (int64, error) {
	if err := idgen.CheckTag(tag); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return t.g.Next()
}

// NextN returns n new IDs in increasing order. It checks the tag as Next
// does, then returns an error wrapping idgen.ErrInvalidCount if n < 1. On
// any other failure it returns no IDs; those already taken from the
// generator are never issued again.
func (t *Tagged) NextN(ctx context.Context, tag string, n int) ([]int64, error) {
	if err := idgen.CheckTag(tag); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: got %d", idgen.ErrInvalidCount, n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ids, err := t.g.AppendN(make([]int64, 0, n), n)
	if err != nil {
		return nil, err
	}
	return ids, nil
}
