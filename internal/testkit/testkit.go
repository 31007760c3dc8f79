// Package testkit holds the small helpers the module's tests share, so
// that each exists once: free loopback ports, and polling a condition
// with a bound (testtime's, kept here for its callers; tests that link
// no database use internal/testtime directly). Counting duplicate IDs is
// segmenttest.Duplicates, public for backends outside the module, and
// low enough in the house for the snowflake suites to use.
package testkit

import (
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store/dbtest"
)

// FreePorts returns n distinct loopback ports that were free a moment
// ago (dbtest.FreePorts, which the database servers use too).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	return dbtest.FreePorts(t, n)
}

// WaitFor is testtime.WaitFor: it bounds waits for real processes and
// databases, whose time no fake clock drives.
func WaitFor(timeout, every time.Duration, cond func() error) error {
	return testtime.WaitFor(timeout, every, cond)
}

// Until is testtime.Until: whether cond held within timeout.
func Until(timeout, every time.Duration, cond func() bool) bool {
	return testtime.Until(timeout, every, cond)
}
