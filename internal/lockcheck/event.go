package lockcheck

import (
	"encoding/json"
	"fmt"
)

// Kind is what happened to a worker.
type Kind string

// The events a worker prints, in the order a hold goes through them.
const (
	// Start: the process is up; Owner is its owner for every grant.
	Start Kind = "start"
	// Acquiring: the worker is about to call Acquire. Floor is the
	// highest token in the log, read just before: any grant after it
	// must be above it.
	Acquiring Kind = "acquiring"
	// AcquireError: Acquire failed (the lock store is down, say).
	AcquireError Kind = "acquire_error"
	// Granted: Acquire returned Token for hold Hold.
	Granted Kind = "granted"
	// Wrote: a write with Token committed as log row ID.
	Wrote Kind = "wrote"
	// Stale: the guard refused a write with Token (lock.ErrStaleToken).
	Stale Kind = "stale"
	// WriteError: a write failed otherwise; its outcome is the log's.
	WriteError Kind = "write_error"
	// Lost: the lease said it was lost (Lost closed); Err is its Err.
	Lost Kind = "lost"
	// Released: Release returned nil. Floor is the highest token in the
	// log, read just before Release was called.
	Released Kind = "released"
	// ReleaseError: Release returned Err; Reason classifies it.
	ReleaseError Kind = "release_error"
)

// Event is one line of a worker's standard output.
type Event struct {
	Kind   Kind   `json:"ev"`
	Worker string `json:"w"`
	Owner  string `json:"owner,omitempty"`
	Hold   int    `json:"hold,omitempty"` // the worker's hold number, from 1
	Token  int64  `json:"token,omitempty"`
	Floor  int64  `json:"floor,omitempty"`
	ID     int64  `json:"id,omitempty"`     // the log row of a write
	Err    string `json:"err,omitempty"`    // the error, in words
	Reason string `json:"reason,omitempty"` // lost, expired, not_held, other
}

// ParseEvent reads one line a worker printed.
func ParseEvent(line []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(line, &e); err != nil {
		return Event{}, fmt.Errorf("lockcheck: event %q: %w", line, err)
	}
	if e.Kind == "" || e.Worker == "" {
		return Event{}, fmt.Errorf("lockcheck: event %q: no kind or worker", line)
	}
	return e, nil
}

// LogTable is the guarded resource's log of accepted writes: one row per
// write, in commit order (id), created by the test on the resource's
// PostgreSQL before the workers start.
const LogTable = "lockcheck_log"

// LogDDL creates LogTable.
const LogDDL = `CREATE TABLE IF NOT EXISTS ` + LogTable + ` (
	id BIGSERIAL PRIMARY KEY,
	worker TEXT NOT NULL,
	owner TEXT NOT NULL,
	hold INT NOT NULL,
	token BIGINT NOT NULL)`
