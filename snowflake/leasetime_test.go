package snowflake_test

import (
	"testing"
	"time"

	"github.com/idgen/idgen/snowflake"
)

func TestLeaseMillis(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   time.Time
		ms   int64
		out  time.Time
	}{
		{"zero is never", time.Time{}, 0, time.Time{}},
		{"epoch start is a real time", time.UnixMilli(1).UTC(), 1, time.UnixMilli(1).UTC()},
		{"sub-millisecond is cut", time.Date(2026, 12, 1, 0, 0, 0, 1_999_999, time.UTC), 1796083200001, time.Date(2026, 12, 1, 0, 0, 0, 1_000_000, time.UTC)},
		{"other zones come back UTC", time.Date(2026, 12, 1, 8, 0, 0, 0, time.FixedZone("UTC+8", 8*3600)), 1796083200000, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := snowflake.LeaseMillis(tc.in)
			if ms != tc.ms {
				t.Fatalf("LeaseMillis = %d, want %d", ms, tc.ms)
			}
			if got := snowflake.LeaseTime(ms); !got.Equal(tc.out) || got.Location() != tc.out.Location() {
				t.Fatalf("LeaseTime(%d) = %v, want %v", ms, got, tc.out)
			}
		})
	}
	if got := snowflake.LeaseTime(-5); !got.IsZero() {
		t.Fatalf("LeaseTime(-5) = %v, want the zero Time", got)
	}
}
