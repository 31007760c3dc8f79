// Package testkit holds the small helpers the module's tests share, so
// that each exists once: free loopback ports and polling a condition
// with a bound. Counting duplicate IDs is segmenttest.Duplicates, public
// for backends outside the module, and low enough in the house for the
// snowflake suites to use.
package testkit

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idgen/idgen/store/dbtest"
)

// FreePorts returns n distinct loopback ports that were free a moment
// ago (dbtest.FreePorts, which the database servers use too).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	return dbtest.FreePorts(t, n)
}

// WaitFor calls cond every interval until it returns nil or timeout has
// passed, and then returns nil or cond's last error, saying how long it
// waited. It bounds waits for real processes and databases, whose time
// no fake clock drives.
func WaitFor(timeout, every time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(every)
	}
}

var errNotYet = errors.New("testkit: the condition does not hold yet")

// Until is WaitFor for a condition without a reason: whether cond held
// within timeout.
func Until(timeout, every time.Duration, cond func() bool) bool {
	return WaitFor(timeout, every, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) == nil
}
