// Package retry marks an error with the wait after which asking again can
// help. The server reads it, through the RetryAfter method, for HTTP's
// Retry-After and gRPC's RetryInfo, as callers of pgconn read SafeToRetry:
// by a method rather than a sentinel, so that wrapping keeps it.
package retry

import "time"

// After returns err with a RetryAfter method that returns wait. It
// matches everything err matches with errors.Is and errors.As, and says
// what err says.
func After(err error, wait time.Duration) error { return &afterError{err, wait} }

type afterError struct {
	err  error
	wait time.Duration
}

func (e *afterError) Error() string             { return e.err.Error() }
func (e *afterError) Unwrap() error             { return e.err }
func (e *afterError) RetryAfter() time.Duration { return e.wait }
