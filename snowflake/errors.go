package snowflake

import "errors"

var (
	// ErrInvalidConfig is returned when New or NewLayout is given a
	// configuration it cannot use. The wrapping error says what to change.
	ErrInvalidConfig = errors.New("snowflake: invalid config")

	// ErrInvalidWorkerID is returned when a worker ID does not fit the
	// layout's worker bits. From New it is also an ErrInvalidConfig.
	ErrInvalidWorkerID = errors.New("snowflake: worker ID out of range")

	// ErrInvalidID is returned when Decode is given a negative ID, or when
	// Encode is given parts that do not fit the layout.
	ErrInvalidID = errors.New("snowflake: invalid ID")

	// ErrClockMovedBackwards is returned when the clock is further behind
	// the last timestamp the Generator issued, or its NotBefore floor, than
	// Config.MaxBackward allows. The wrapping error says by how much. The
	// Generator issues nothing until the clock has caught up, so the call
	// may be retried after that long.
	ErrClockMovedBackwards = errors.New("snowflake: clock moved backwards")

	// ErrFloorAhead is returned, matching ErrClockMovedBackwards too, when
	// what is ahead of the clock is not an ID this Generator issued but a
	// floor it was given (Config.NotBefore, or a lease's LastTimestamp): an
	// earlier holder's last timestamp, or the hold a store fence puts on
	// every worker after a failover or restore. The clock is likely right;
	// the Generator waits the floor out.
	ErrFloorAhead = errors.New("snowflake: worker floor ahead of the clock")

	// ErrTimeExhausted is returned when the clock has passed the last
	// millisecond the layout's time bits can hold (see Layout.End). It is
	// permanent for the layout.
	ErrTimeExhausted = errors.New("snowflake: time bits exhausted")

	// ErrNoWorkerLease is returned when a Generator is paused, or its lease
	// deadline has passed: it may no longer hold its worker ID, so issuing
	// could duplicate another process's IDs. A Leased generator recovers by
	// itself once it holds a lease again.
	ErrNoWorkerLease = errors.New("snowflake: no worker lease")

	// ErrClosed is returned by a Leased generator after Close. It comes
	// wrapped with ErrNoWorkerLease, since a closed Leased holds no lease.
	ErrClosed = errors.New("snowflake: closed")
)

// multiError gives an error its own message while letting errors.Is match
// several sentinels, which fmt.Errorf can only do by repeating each
// sentinel's "snowflake: " prefix in the message.
type multiError struct {
	msg  string
	errs []error
}

func (e *multiError) Error() string   { return e.msg }
func (e *multiError) Unwrap() []error { return e.errs }
