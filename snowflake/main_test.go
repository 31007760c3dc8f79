package snowflake

import (
	"testing"

	"go.uber.org/goleak"
)

// A Generator starts no goroutines; this keeps it that way.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
