// Package unixmilli is how lease stores keep a time in a BIGINT column:
// Unix milliseconds, with 0 for "never". The SQL stores and the
// in-memory lease store share it, so that both read back exactly the
// times the other would.
package unixmilli

import "time"

// From encodes t; the zero Time is 0, not the year-1 milliseconds, so
// that "never" compares below every real time.
func From(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// To decodes ms: 0 or less is the zero Time, any other value a UTC time.
func To(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
