package idgen_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idgen/idgen"
)

func TestWithRetryAfter(t *testing.T) {
	base := errors.New("store down")
	err := fmt.Errorf("wrapped: %w", idgen.WithRetryAfter(base, 3*time.Second))
	var w interface{ RetryAfter() time.Duration }
	if !errors.Is(err, base) || !errors.As(err, &w) || w.RetryAfter() != 3*time.Second || err.Error() != "wrapped: store down" {
		t.Fatalf("%v: want base matched, its message, and RetryAfter 3s", err)
	}
}
