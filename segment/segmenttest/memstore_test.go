package segmenttest_test

import (
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

// The fake must behave like a real backend, or tests built on it lie.
func TestMemStore_Conformance(t *testing.T) {
	s := segmenttest.NewMemStore()
	segmenttest.Run(t, func(t *testing.T) segment.Store { return s })
}
