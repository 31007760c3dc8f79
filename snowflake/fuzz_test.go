package snowflake

import (
	"errors"
	"math"
	"testing"
	"time"
)

func FuzzDecode(f *testing.F) {
	f.Add(int64(0), int64(0), uint8(0), uint8(0))
	f.Add(int64(-1), int64(0), uint8(41), uint8(10))
	f.Add(int64(math.MaxInt64), int64(1288834974657), uint8(41), uint8(10))
	f.Add(int64(21383243891179527), int64(0), uint8(0), uint8(0))
	f.Add(int64(math.MinInt64), int64(math.MaxInt64), uint8(61), uint8(1))
	f.Add(int64(12345), int64(-5), uint8(1), uint8(61))
	f.Fuzz(func(t *testing.T, id, epochMs int64, timeBits, workerBits uint8) {
		// Arbitrary widths, mostly invalid, must be refused without panic;
		// the zero Layout then stands in.
		l, err := NewLayout(time.UnixMilli(epochMs), int(timeBits), int(workerBits), idBits-int(timeBits)-int(workerBits))
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewLayout error %v is not ErrInvalidConfig", err)
			}
			l = Layout{}
		}
		p, err := l.Decode(id)
		if id < 0 {
			if !errors.Is(err, ErrInvalidID) {
				t.Fatalf("Decode(%d) = %+v, %v; want ErrInvalidID", id, p, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Decode(%d): %v", id, err)
		}
		if p.Time.Before(l.Epoch()) || p.Time.After(l.End()) || p.Time.Nanosecond()%int(time.Millisecond) != 0 ||
			p.WorkerID < 0 || p.WorkerID > l.MaxWorkerID() || p.Sequence < 0 || p.Sequence > l.MaxSequence() {
			t.Fatalf("Decode(%d) = %+v, outside layout %+v", id, p, l)
		}
		back, err := l.Encode(p)
		if err != nil || back != id {
			t.Fatalf("Encode(Decode(%d)) = %d, %v", id, back, err)
		}
	})
}

func FuzzConfig(f *testing.F) {
	f.Add(int64(0), 0, 0, 0, int64(0), int64(0), int64(0), uint16(0))
	f.Add(int64(1000), 41, 10, 12, int64(1023), int64(time.Millisecond), int64(3), uint16(7))
	f.Add(int64(5e9), 36, 15, 12, int64(-1), int64(-1), int64(-100), uint16(4096))
	f.Add(int64(1), 61, 1, 1, int64(1), int64(time.Second), int64(3_600_000), uint16(1))
	f.Add(int64(-1), 35, 27, 1, int64(1<<26), int64(2*time.Second), int64(6), uint16(3))
	f.Add(int64(math.MinInt64), 63, 0, 0, int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), uint16(65535))
	start := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, epochAgoMs int64, timeBits, workerBits, sequenceBits int, workerID, maxBackward, floorInMs int64, n uint16) {
		c := newFakeClock(start)
		cfg := Config{
			TimeBits: timeBits, WorkerBits: workerBits, SequenceBits: sequenceBits,
			WorkerID: workerID, MaxBackward: time.Duration(maxBackward), Clock: c,
		}
		if epochAgoMs != 0 {
			cfg.Epoch = time.UnixMilli(start.UnixMilli() - epochAgoMs)
		}
		if floorInMs != 0 {
			// Within ten years either way, so the clock can catch up.
			cfg.NotBefore = start.Add(time.Duration(floorInMs%(10*365*24*3600*1000)) * time.Millisecond)
		}
		g, err := New(cfg)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New error %v is not ErrInvalidConfig", err)
			}
			return
		}
		l := g.Layout()

		ids, err := g.NextN(int(n%5000) + 1)
		if errors.Is(err, ErrClockMovedBackwards) {
			if len(ids) != 0 || !cfg.NotBefore.After(start.Add(g.maxBackward)) {
				t.Fatalf("NextN = %d IDs, %v, with NotBefore %v and MaxBackward %v", len(ids), err, cfg.NotBefore, g.maxBackward)
			}
			c.Advance(cfg.NotBefore.Sub(c.Wall()) + time.Millisecond)
			ids, err = g.NextN(int(n%5000) + 1)
		}
		if errors.Is(err, ErrTimeExhausted) {
			if !cfg.NotBefore.Add(time.Millisecond).After(l.End()) {
				t.Fatalf("ErrTimeExhausted with NotBefore %v before the layout's end %v", cfg.NotBefore, l.End())
			}
			return
		}
		if err != nil {
			t.Fatalf("NextN: %v", err)
		}

		floorMs := cfg.NotBefore.Truncate(time.Millisecond)
		for i, id := range ids {
			p, err := g.Decode(id)
			if err != nil || id < 0 {
				t.Fatalf("Decode(%d): %v", id, err)
			}
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("ID %d = %d is not above %d", i, id, ids[i-1])
			}
			if p.WorkerID != workerID || p.Time.After(c.Wall()) || !p.Time.After(floorMs) || p.Time.Before(start.Truncate(time.Millisecond)) {
				t.Fatalf("ID %d decodes to %+v; worker %d, clock %v, floor %v", id, p, workerID, c.Wall(), cfg.NotBefore)
			}
			if back, err := l.Encode(p); err != nil || back != id {
				t.Fatalf("Encode(Decode(%d)) = %d, %v", id, back, err)
			}
		}
	})
}
