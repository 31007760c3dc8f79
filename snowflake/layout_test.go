package snowflake

import (
	"errors"
	"math"
	"testing"
	"time"
)

func mustLayout(t testing.TB, epoch time.Time, timeBits, workerBits, sequenceBits int) Layout {
	t.Helper()
	l, err := NewLayout(epoch, timeBits, workerBits, sequenceBits)
	if err != nil {
		t.Fatalf("NewLayout: %v", err)
	}
	return l
}

func TestNewLayout_ZeroArgumentsGiveTheZeroLayout(t *testing.T) {
	l := mustLayout(t, time.Time{}, 0, 0, 0)
	var zero Layout
	if l.Epoch() != zero.Epoch() || l.TimeBits() != zero.TimeBits() || l.WorkerBits() != zero.WorkerBits() ||
		l.SequenceBits() != zero.SequenceBits() || l.End() != zero.End() {
		t.Errorf("NewLayout(zero) = %+v, differs from the zero Layout", l)
	}
	if got, want := zero.End(), time.Date(2095, 9, 7, 15, 47, 35, 551e6, time.UTC); !got.Equal(want) {
		t.Errorf("default End = %v, want %v", got, want)
	}
	if zero.MaxWorkerID() != 1023 || zero.MaxSequence() != 4095 {
		t.Errorf("default MaxWorkerID, MaxSequence = %d, %d; want 1023, 4095", zero.MaxWorkerID(), zero.MaxSequence())
	}
}

func TestNewLayout_RejectsEpochBeyondInt64Milliseconds(t *testing.T) {
	_, err := NewLayout(time.UnixMilli(math.MaxInt64-1<<41+1), 41, 10, 12)
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewLayout with an epoch whose end overflows = %v, want ErrInvalidConfig", err)
	}
	if _, err := NewLayout(time.UnixMilli(math.MaxInt64-1<<41), 41, 10, 12); err != nil {
		t.Errorf("NewLayout with the last epoch that fits = %v", err)
	}
}

func TestDecode_UsesDefaultLayout(t *testing.T) {
	// 2026-03-01 is 59 days, 5,097,600,000 ms, after the default epoch.
	id := int64(5_097_600_000)<<22 | 5<<12 | 7
	p, err := Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Parts{Time: t0, WorkerID: 5, Sequence: 7}); p != want {
		t.Errorf("Decode(%d) = %+v, want %+v", id, p, want)
	}
}

func TestLayout_Decode_RejectsNegativeID(t *testing.T) {
	for _, id := range []int64{-1, math.MinInt64} {
		if p, err := (Layout{}).Decode(id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Decode(%d) = %+v, %v; want ErrInvalidID", id, p, err)
		}
	}
}

func TestLayout_Decode_RoundTrip(t *testing.T) {
	epoch := time.Date(2010, 11, 4, 1, 42, 54, 657e6, time.UTC) // Twitter's
	tests := []struct {
		name   string
		layout Layout
		ids    []int64
	}{
		{"default", Layout{}, []int64{0, 1, 1 << 22, math.MaxInt64, 21383243891179527}},
		{"Twitter", mustLayout(t, epoch, 41, 10, 12), []int64{0, 1288834974657 << 22, math.MaxInt64}},
		{"61/1/1", mustLayout(t, time.Unix(0, 0), 61, 1, 1), []int64{0, 2, 3, math.MaxInt64}},
		{"1/61/1", mustLayout(t, time.Time{}, 1, 61, 1), []int64{0, 1 << 62, math.MaxInt64}},
		{"1/1/61", mustLayout(t, time.Time{}, 1, 1, 61), []int64{0, 1 << 61, math.MaxInt64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, id := range tt.ids {
				p, err := tt.layout.Decode(id)
				if err != nil {
					t.Fatalf("Decode(%d): %v", id, err)
				}
				if p.Time.Before(tt.layout.Epoch()) || p.Time.After(tt.layout.End()) ||
					p.WorkerID < 0 || p.WorkerID > tt.layout.MaxWorkerID() || p.Sequence < 0 || p.Sequence > tt.layout.MaxSequence() {
					t.Errorf("Decode(%d) = %+v, outside the layout", id, p)
				}
				back, err := tt.layout.Encode(p)
				if err != nil || back != id {
					t.Errorf("Encode(Decode(%d)) = %d, %v", id, back, err)
				}
			}
		})
	}
}

func TestLayout_Encode_RejectsPartsOutsideTheLayout(t *testing.T) {
	var l Layout
	tests := []struct {
		name    string
		parts   Parts
		wantErr error
	}{
		{"worker ID 1024", Parts{Time: t0, WorkerID: 1024}, ErrInvalidWorkerID},
		{"negative worker ID", Parts{Time: t0, WorkerID: -1}, ErrInvalidWorkerID},
		{"sequence 4096", Parts{Time: t0, Sequence: 4096}, ErrInvalidID},
		{"negative sequence", Parts{Time: t0, Sequence: -1}, ErrInvalidID},
		{"before the epoch", Parts{Time: l.Epoch().Add(-time.Nanosecond)}, ErrInvalidID},
		{"after the end", Parts{Time: l.End().Add(time.Millisecond)}, ErrInvalidID},
		{"zero time", Parts{}, ErrInvalidID},
		{"year 292277026596", Parts{Time: time.Unix(math.MaxInt64-62135596800, 0)}, ErrInvalidID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if id, err := l.Encode(tt.parts); !errors.Is(err, tt.wantErr) {
				t.Errorf("Encode(%+v) = %d, %v; want %v", tt.parts, id, err, tt.wantErr)
			}
		})
	}
	// The edges themselves fit, and Encode truncates to the millisecond.
	for _, p := range []Parts{{Time: l.Epoch()}, {Time: l.End().Add(time.Millisecond - 1), WorkerID: 1023, Sequence: 4095}} {
		id, err := l.Encode(p)
		if err != nil {
			t.Fatalf("Encode(%+v): %v", p, err)
		}
		if got, _ := l.Decode(id); !got.Time.Equal(p.Time.Truncate(time.Millisecond)) {
			t.Errorf("Decode(Encode(%+v)) = %+v", p, got)
		}
	}
}
