package segmenttest_test

import (
	"context"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

// The fake must behave like a real backend, or tests built on it lie.
func TestMemStore_Conformance(t *testing.T) {
	s := segmenttest.NewMemory()
	segmenttest.Run(t, func(t *testing.T) segment.Store { return s })
}

func TestMemStore_Regression(t *testing.T) {
	st := segmenttest.NewMemory()
	segmenttest.Regression(t, st, func(_ context.Context, tag string, maxID int64) error {
		st.SetMaxID(tag, maxID)
		return nil
	}, nil)
}
