package segment

import "time"

// SetClock replaces the clock that step and backoff decisions use.
func SetClock(o *Options, now func() time.Time) { o.Now = now }
