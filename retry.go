package idgen

import "time"

// WithRetryAfter returns err marked with the wait after which asking
// again can help: a segment in backoff knows when its next load starts,
// a snowflake clock that is behind knows by how much. The mark is a
// method, RetryAfter() time.Duration, read with errors.As, as callers of
// pgconn read SafeToRetry: wrapping with %w keeps it, and the error
// still matches everything err matches and says what err says. The
// server turns it into HTTP's Retry-After and gRPC's RetryInfo; a
// program that embeds segment or snowflake can read it the same way.
func WithRetryAfter(err error, wait time.Duration) error { return &retryAfterError{err, wait} }

type retryAfterError struct {
	err  error
	wait time.Duration
}

func (e *retryAfterError) Error() string             { return e.err.Error() }
func (e *retryAfterError) Unwrap() error             { return e.err }
func (e *retryAfterError) RetryAfter() time.Duration { return e.wait }
