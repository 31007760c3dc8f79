package snowflake

import "time"

// LeaseMillis is how a lease store keeps a Lease's times (ExpiresAt,
// LastTimestamp) and a layout's time floor in an integer column: Unix
// milliseconds, with the zero Time as 0, not the year-1 milliseconds, so
// that "never" compares below every real time. The SQL stores, the
// in-memory store of snowflaketest and a store of your own then read
// back exactly the times the others would.
func LeaseMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// LeaseTime is the inverse of LeaseMillis: 0 or less is the zero Time,
// any other value a UTC time.
func LeaseTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
