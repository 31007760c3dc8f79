package snowflake

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// newTestGenerator returns a generator on a fake clock that starts at start.
func newTestGenerator(t testing.TB, start time.Time, cfg Config) (*Generator, *fakeClock) {
	t.Helper()
	c := newFakeClock(start)
	cfg.Clock = c
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g, c
}

func mustNext(t testing.TB, g *Generator) int64 {
	t.Helper()
	id, err := g.Next()
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	if id < 0 {
		t.Fatalf("Next = %d, negative", id)
	}
	return id
}

func mustDecode(t testing.TB, g *Generator, id int64) Parts {
	t.Helper()
	p, err := g.Decode(id)
	if err != nil {
		t.Fatalf("Decode(%d): %v", id, err)
	}
	return p
}

func (g *Generator) rounds() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lockRounds
}

func TestNew_FillsDefaults(t *testing.T) {
	g, _ := newTestGenerator(t, t0, Config{})
	l := g.Layout()
	if got, want := l.Epoch(), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Epoch = %v, want %v", got, want)
	}
	if l.TimeBits() != 41 || l.WorkerBits() != 10 || l.SequenceBits() != 12 {
		t.Errorf("bits = %d/%d/%d, want 41/10/12", l.TimeBits(), l.WorkerBits(), l.SequenceBits())
	}
	if l != (Layout{}).norm() {
		t.Errorf("Layout = %+v, want the zero Layout's %+v", l, Layout{}.norm())
	}
	if g.maxBackward != 5*time.Millisecond {
		t.Errorf("MaxBackward = %v, want 5ms", g.maxBackward)
	}
	if g.WorkerID() != 0 {
		t.Errorf("WorkerID = %d, want 0", g.WorkerID())
	}
	if ts := g.LastTimestamp(); !ts.IsZero() {
		t.Errorf("LastTimestamp = %v before any ID, want zero", ts)
	}
	if _, ok := mustGenerator(New(Config{})).clock.(systemClock); !ok {
		t.Errorf("nil Clock did not select the system clock")
	}
}

func mustGenerator(g *Generator, err error) *Generator {
	if err != nil {
		panic(err)
	}
	return g
}

func TestNew_RejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr error  // besides ErrInvalidConfig
		wantMsg string // part of the advice on what to fix
	}{
		{"some bits zero", Config{TimeBits: 41}, nil, "all be zero"},
		{"negative bits", Config{TimeBits: 41, WorkerBits: -1, SequenceBits: 23}, nil, "all positive"},
		{"bits sum to 62", Config{TimeBits: 41, WorkerBits: 10, SequenceBits: 11}, nil, "must be 63"},
		{"bits sum to 64", Config{TimeBits: 41, WorkerBits: 11, SequenceBits: 12}, nil, "must be 63"},
		{"huge bits", Config{TimeBits: 1 << 62, WorkerBits: 1 << 62, SequenceBits: 63}, nil, "must be 63"},
		{"epoch in the future", Config{Epoch: t0.Add(time.Millisecond)}, nil, "Choose an Epoch in the past"},
		{"epoch before 1970", Config{Epoch: time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)}, nil, "before 1970"},
		{"too few time bits", Config{TimeBits: 34, WorkerBits: 17, SequenceBits: 12, Epoch: t0}, nil, "more TimeBits"},
		{"time bits ran out", Config{TimeBits: 40, WorkerBits: 11, SequenceBits: 12, Epoch: time.Unix(0, 0)}, nil, "later Epoch"},
		{"half a year of time bits left", Config{TimeBits: 36, WorkerBits: 15, SequenceBits: 12, Epoch: t0.Add(-time.Duration(1<<36-1)*time.Millisecond + 180*24*time.Hour)}, nil, "less than 8760h0m0s"},
		{"exactly a year of time bits left", Config{TimeBits: 36, WorkerBits: 15, SequenceBits: 12, Epoch: t0.Add(-time.Duration(1<<36-1)*time.Millisecond + minTimeLeft)}, nil, "more TimeBits"},
		{"worker ID 1024 of 10 bits", Config{WorkerID: 1024}, ErrInvalidWorkerID, "smaller WorkerID or more WorkerBits"},
		{"negative worker ID", Config{WorkerID: -1}, ErrInvalidWorkerID, "not in 0..1023"},
		{"worker ID 32 of 5 bits", Config{TimeBits: 41, WorkerBits: 5, SequenceBits: 17, WorkerID: 32}, ErrInvalidWorkerID, "not in 0..31"},
		{"MaxBackward over a second", Config{MaxBackward: time.Second + 1}, nil, "lower MaxBackward"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Clock = newFakeClock(t0)
			g, err := New(tt.cfg)
			if err == nil {
				t.Fatalf("New succeeded with layout %+v", g.Layout())
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %q is not ErrInvalidConfig", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %q is not %v", err, tt.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "snowflake: ") || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not start with \"snowflake: \" and say %q", err, tt.wantMsg)
			}
		})
	}
}

func TestNew_AcceptsBoundaryConfig(t *testing.T) {
	// The epoch that leaves exactly a year and a millisecond of 36 bits.
	lastEpoch := t0.Add(-time.Duration(1<<36-1)*time.Millisecond + minTimeLeft + time.Millisecond)
	tests := []struct {
		name string
		cfg  Config
	}{
		{"epoch is now", Config{Epoch: t0}},
		{"a year and a millisecond left", Config{TimeBits: 36, WorkerBits: 15, SequenceBits: 12, Epoch: lastEpoch}},
		{"largest worker ID", Config{WorkerID: 1023}},
		{"one worker bit", Config{TimeBits: 41, WorkerBits: 1, SequenceBits: 21, WorkerID: 1}},
		{"one sequence bit", Config{TimeBits: 41, WorkerBits: 21, SequenceBits: 1, WorkerID: 1<<21 - 1}},
		{"61 time bits", Config{TimeBits: 61, WorkerBits: 1, SequenceBits: 1}},
		{"35 time bits", Config{TimeBits: 35, WorkerBits: 16, SequenceBits: 12, Epoch: t0}},
		{"MaxBackward one second", Config{MaxBackward: time.Second}},
		{"MaxBackward negative", Config{MaxBackward: -1}},
		{"epoch with nanoseconds", Config{Epoch: t0.Add(-time.Nanosecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newTestGenerator(t, t0, tt.cfg)
			id := mustNext(t, g)
			p := mustDecode(t, g, id)
			if !p.Time.Equal(t0) || p.WorkerID != tt.cfg.WorkerID || p.Sequence != 0 {
				t.Errorf("Decode(Next()) = %+v, want {%v %d 0}", p, t0, tt.cfg.WorkerID)
			}
		})
	}
}

func TestGenerator_Next_WaitsOutSmallBackwardJump(t *testing.T) {
	tests := []struct {
		name  string
		into  time.Duration // how far into its millisecond the first ID is
		jump  time.Duration
		sleep time.Duration // until the start of that millisecond again
	}{
		{"1ms", 0, time.Millisecond, time.Millisecond},
		{"3ms", 0, 3 * time.Millisecond, 3 * time.Millisecond},
		{"5ms", 0, 5 * time.Millisecond, 5 * time.Millisecond},
		{"5.3ms from 0.3ms in", 300 * time.Microsecond, 5300 * time.Microsecond, 5 * time.Millisecond},
		{"0.5ms within the millisecond", 700 * time.Microsecond, 500 * time.Microsecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, c := newTestGenerator(t, t0.Add(tt.into), Config{})
			first := mustNext(t, g)
			c.StepWall(-tt.jump)
			second := mustNext(t, g)
			if second <= first {
				t.Fatalf("after a %v jump back, Next = %d, not above %d", tt.jump, second, first)
			}
			if got := c.Slept(); got != tt.sleep {
				t.Errorf("slept %v, want %v", got, tt.sleep)
			}
			p1, p2 := mustDecode(t, g, first), mustDecode(t, g, second)
			if !p2.Time.Equal(p1.Time) || p2.Sequence != p1.Sequence+1 {
				t.Errorf("second ID %+v does not follow first %+v in its millisecond", p2, p1)
			}
			// Re-anchored on the wall clock: no more waiting from now on.
			third := mustNext(t, g)
			if third <= second || c.Slept() != tt.sleep {
				t.Errorf("third Next = %d after %d, slept %v in all; want no more waiting", third, second, c.Slept())
			}
		})
	}
}

func TestGenerator_Next_RefusesLargeBackwardJumpUntilCaughtUp(t *testing.T) {
	tests := []struct {
		name string
		jump time.Duration
	}{
		{"6ms", 6 * time.Millisecond},
		{"1s", time.Second},
		{"1h", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, c := newTestGenerator(t, t0, Config{})
			first := mustNext(t, g)
			last := g.LastTimestamp()
			c.StepWall(-tt.jump)

			// Refused, without sleeping, for as long as the clock is more
			// than MaxBackward behind.
			for _, wait := range []time.Duration{0, tt.jump - 6*time.Millisecond} {
				c.Advance(wait)
				id, err := g.Next()
				if !errors.Is(err, ErrClockMovedBackwards) {
					t.Fatalf("%v after the jump: Next = %d, %v; want ErrClockMovedBackwards", wait, id, err)
				}
				behind := tt.jump - wait
				if want := fmt.Sprintf("backwards by %v", behind); !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
				if ids, err := g.NextN(3); len(ids) != 0 || !errors.Is(err, ErrClockMovedBackwards) {
					t.Errorf("NextN(3) = %v, %v; want nothing and ErrClockMovedBackwards", ids, err)
				}
			}
			if c.Slept() != 0 {
				t.Errorf("slept %v while refusing", c.Slept())
			}
			if got := g.LastTimestamp(); !got.Equal(last) {
				t.Errorf("LastTimestamp moved from %v to %v while refusing", last, got)
			}

			// Caught up: issues again at once, after the earlier ID.
			c.Advance(6 * time.Millisecond)
			second := mustNext(t, g)
			if second <= first || c.Slept() != 0 {
				t.Errorf("after catching up, Next = %d (first was %d), slept %v", second, first, c.Slept())
			}
		})
	}
}

func TestGenerator_Next_RefusesEveryJumpWhenMaxBackwardIsNegative(t *testing.T) {
	g, c := newTestGenerator(t, t0, Config{MaxBackward: -1})
	mustNext(t, g)
	c.StepWall(-time.Millisecond)
	if _, err := g.Next(); !errors.Is(err, ErrClockMovedBackwards) {
		t.Fatalf("Next after 1ms jump = %v, want ErrClockMovedBackwards", err)
	}
	// Overflowing a millisecond is not a backward clock and still waits.
	c.Advance(time.Millisecond)
	ids, err := g.NextN(4097)
	if err != nil || len(ids) != 4097 {
		t.Fatalf("NextN(4097) = %d IDs, %v", len(ids), err)
	}
}

func TestGenerator_Next_AdoptsForwardWallStep(t *testing.T) {
	g, c := newTestGenerator(t, t0, Config{})
	mustNext(t, g)
	c.StepWall(time.Hour)
	id := mustNext(t, g)
	if got := mustDecode(t, g, id).Time; !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("after a 1h step forward, ID time = %v, want %v", got, t0.Add(time.Hour))
	}
	// Undoing the step now runs into the IDs issued an hour ahead.
	c.StepWall(-time.Hour)
	if _, err := g.Next(); !errors.Is(err, ErrClockMovedBackwards) {
		t.Errorf("after stepping back again, Next = %v, want ErrClockMovedBackwards", err)
	}
}

func TestGenerator_Next_IgnoresMomentaryClockDisagreement(t *testing.T) {
	for _, glitch := range []time.Duration{-time.Hour, -10 * time.Millisecond, 10 * time.Millisecond} {
		t.Run(glitch.String(), func(t *testing.T) {
			g, c := newTestGenerator(t, t0, Config{})
			mustNext(t, g)
			c.Glitch(glitch)
			id := mustNext(t, g)
			if p := mustDecode(t, g, id); !p.Time.Equal(t0) || p.Sequence != 1 || c.Slept() != 0 {
				t.Errorf("after a one-reading glitch of %v: %+v, slept %v; want the same millisecond, no sleep", glitch, p, c.Slept())
			}
		})
	}
}

func TestGenerator_Next_WaitsForNextMillisecondOnSequenceOverflow(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		into time.Duration
	}{
		{"12 sequence bits", Config{}, 0},
		{"12 sequence bits, 0.7ms in", Config{}, 700 * time.Microsecond},
		{"1 sequence bit", Config{TimeBits: 41, WorkerBits: 21, SequenceBits: 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, c := newTestGenerator(t, t0.Add(tt.into), tt.cfg)
			perMs := g.Layout().MaxSequence() + 1
			var prev int64 = -1
			for i := range perMs {
				id := mustNext(t, g)
				if p := mustDecode(t, g, id); !p.Time.Equal(t0) || p.Sequence != i || id <= prev {
					t.Fatalf("ID %d of the millisecond: %+v (id %d after %d)", i, p, id, prev)
				}
				prev = id
			}
			if c.Slept() != 0 {
				t.Fatalf("slept %v before the sequence ran out", c.Slept())
			}
			id := mustNext(t, g)
			if p := mustDecode(t, g, id); !p.Time.Equal(t0.Add(time.Millisecond)) || p.Sequence != 0 || id <= prev {
				t.Errorf("first ID after overflow: %+v, want sequence 0 of the next millisecond", p)
			}
			if want := time.Millisecond - tt.into; c.Slept() != want {
				t.Errorf("slept %v, want %v", c.Slept(), want)
			}
		})
	}
}

func TestGenerator_Next_ReturnsErrTimeExhausted(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"default layout", Config{}},
		{"36 time bits", Config{TimeBits: 36, WorkerBits: 15, SequenceBits: 12, Epoch: t0, WorkerID: 1<<15 - 1}},
		{"35 time bits, 1 sequence bit", Config{TimeBits: 35, WorkerBits: 27, SequenceBits: 1, Epoch: t0, WorkerID: 1<<27 - 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, c := newTestGenerator(t, t0, tt.cfg)
			end := g.Layout().End()
			c.Advance(end.Sub(c.Wall()))

			ids, err := g.NextN(int(g.Layout().MaxSequence()) + 10)
			if !errors.Is(err, ErrTimeExhausted) {
				t.Fatalf("NextN past the end: %d IDs, %v; want ErrTimeExhausted", len(ids), err)
			}
			if int64(len(ids)) != g.Layout().MaxSequence()+1 {
				t.Errorf("NextN issued %d IDs in the last millisecond, want %d", len(ids), g.Layout().MaxSequence()+1)
			}
			for i, id := range ids {
				p := mustDecode(t, g, id)
				if id < 0 || !p.Time.Equal(end) || p.Sequence != int64(i) || p.WorkerID != tt.cfg.WorkerID {
					t.Fatalf("ID %d = %d %+v, want sequence %d at %v", i, id, p, i, end)
				}
			}
			if c.Slept() != 0 {
				t.Errorf("slept %v waiting for a millisecond that cannot come", c.Slept())
			}
			for _, d := range []time.Duration{0, time.Millisecond, 24 * time.Hour} {
				c.Advance(d)
				if id, err := g.Next(); !errors.Is(err, ErrTimeExhausted) || id != 0 {
					t.Errorf("Next past the end = %d, %v; want 0, ErrTimeExhausted", id, err)
				}
			}
		})
	}
}

func TestGenerator_Next_WaitsOutSmallFloorGap(t *testing.T) {
	tests := []struct {
		name     string
		floor    time.Duration // NotBefore relative to now
		wantTime time.Duration // of the first ID, relative to now
	}{
		{"floor 1ms ago", -time.Millisecond, 0},
		{"floor 0.5ms ago, same millisecond", -500 * time.Microsecond, time.Millisecond},
		{"floor now", 0, time.Millisecond},
		{"floor in 3ms", 3 * time.Millisecond, 4 * time.Millisecond},
		{"floor in 5ms", 5 * time.Millisecond, 6 * time.Millisecond},
		{"floor before epoch", -24 * 365 * time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := t0.Add(700 * time.Microsecond)
			g, c := newTestGenerator(t, start, Config{NotBefore: start.Add(tt.floor)})
			id := mustNext(t, g)
			want := start.Add(tt.wantTime).Truncate(time.Millisecond)
			if got := mustDecode(t, g, id).Time; !got.Equal(want) {
				t.Errorf("first ID at %v, want %v", got, want)
			}
			if got, want := c.Slept(), want.Sub(start); got != max(want, 0) {
				t.Errorf("slept %v, want %v", got, want)
			}
		})
	}
}

func TestGenerator_Next_RefusesLargeFloorGapUntilCaughtUp(t *testing.T) {
	for _, gap := range []time.Duration{6 * time.Millisecond, time.Second, time.Hour} {
		t.Run(gap.String(), func(t *testing.T) {
			floor := t0.Add(gap)
			g, c := newTestGenerator(t, t0, Config{NotBefore: floor})
			if got := g.LastTimestamp(); !got.Equal(floor) {
				t.Errorf("LastTimestamp = %v, want the floor %v", got, floor)
			}
			if _, err := g.Next(); !errors.Is(err, ErrClockMovedBackwards) || !strings.Contains(err.Error(), "by "+gap.String()) {
				t.Fatalf("Next with the floor %v ahead = %v; want ErrClockMovedBackwards by %v", gap, err, gap)
			}
			c.Advance(gap - 6*time.Millisecond)
			if _, err := g.Next(); !errors.Is(err, ErrClockMovedBackwards) {
				t.Fatalf("Next with the floor 6ms ahead = %v; want ErrClockMovedBackwards", err)
			}
			c.Advance(7 * time.Millisecond)
			id := mustNext(t, g)
			if got := mustDecode(t, g, id).Time; !got.Equal(floor.Add(time.Millisecond)) || c.Slept() != 0 {
				t.Errorf("once caught up: ID at %v, slept %v; want %v without sleeping", got, c.Slept(), floor.Add(time.Millisecond))
			}
		})
	}
}

func TestGenerator_NextN_TakesOneLockRoundPerMillisecond(t *testing.T) {
	tests := []struct {
		name       string
		before     int // IDs issued first in the same millisecond
		n          int
		wantRounds uint64
	}{
		{"100", 0, 100, 1},
		{"a whole millisecond", 0, 4096, 1},
		{"one more than a millisecond", 0, 4097, 2},
		{"10000", 0, 10000, 3},
		{"200 with 96 left in the millisecond", 4000, 200, 2},
		{"none", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newTestGenerator(t, t0, Config{WorkerID: 3})
			if _, err := g.NextN(tt.before); err != nil {
				t.Fatal(err)
			}
			r0 := g.rounds()
			ids, err := g.NextN(tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.rounds() - r0; got != tt.wantRounds {
				t.Errorf("NextN(%d) took %d lock rounds, want %d", tt.n, got, tt.wantRounds)
			}
			if len(ids) != tt.n {
				t.Fatalf("NextN(%d) returned %d IDs", tt.n, len(ids))
			}
			seq := int64(tt.before)
			ms := t0
			for i, id := range ids {
				if seq == 4096 {
					seq, ms = 0, ms.Add(time.Millisecond)
				}
				if p := mustDecode(t, g, id); !p.Time.Equal(ms) || p.Sequence != seq || p.WorkerID != 3 {
					t.Fatalf("ID %d: %+v, want sequence %d at %v", i, p, seq, ms)
				}
				seq++
			}
		})
	}
}

func TestGenerator_AppendN_ReusesBuffer(t *testing.T) {
	g, _ := newTestGenerator(t, t0, Config{})
	buf := make([]int64, 0, 100)
	var prev int64
	allocs := testing.AllocsPerRun(200, func() {
		var err error
		buf, err = g.AppendN(buf[:0], 100)
		if err != nil || len(buf) != 100 || buf[0] <= prev {
			t.Fatalf("AppendN = %d IDs from %d after %d, %v", len(buf), buf[0], prev, err)
		}
		prev = buf[99]
	})
	if allocs != 0 {
		t.Errorf("AppendN into a big enough buffer allocated %v times per call", allocs)
	}

	head := []int64{-7}
	got, err := g.AppendN(head, 2)
	if err != nil || len(got) != 3 || got[0] != -7 || got[1] <= prev || got[2] != got[1]+1 {
		t.Errorf("AppendN([-7], 2) = %v, %v", got, err)
	}
	if got, err := g.AppendN(head, -1); err == nil || len(got) != 1 {
		t.Errorf("AppendN(_, -1) = %v, %v; want an error", got, err)
	}
}

func TestGenerator_Pause_RefusesUntilResume(t *testing.T) {
	errHeartbeat := errors.New("heartbeat: database unreachable")
	tests := []struct {
		name    string
		cause   error
		wantErr []error
	}{
		{"nil cause", nil, []error{ErrNoWorkerLease}},
		{"lease lost", fmt.Errorf("renew worker 3: %w", ErrLeaseLost), []error{ErrNoWorkerLease, ErrLeaseLost}},
		{"other cause", errHeartbeat, []error{ErrNoWorkerLease, errHeartbeat}},
		{"already ErrNoWorkerLease", fmt.Errorf("shutting down: %w", ErrNoWorkerLease), []error{ErrNoWorkerLease}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, c := newTestGenerator(t, t0, Config{WorkerID: 3})
			before := mustNext(t, g)
			g.Pause(tt.cause)
			id, err := g.Next()
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("paused Next = %d, %v; want an error matching %v", id, err, want)
				}
			}
			if ids, err := g.NextN(10); len(ids) != 0 || err == nil {
				t.Errorf("paused NextN = %v, %v; want nothing and an error", ids, err)
			}

			if err := g.Resume(1024, time.Time{}); !errors.Is(err, ErrInvalidWorkerID) {
				t.Errorf("Resume(1024) = %v, want ErrInvalidWorkerID", err)
			}
			if _, err := g.Next(); err == nil {
				t.Errorf("a failed Resume unpaused the generator")
			}

			floor := t0.Add(3 * time.Millisecond)
			if err := g.Resume(7, floor); err != nil {
				t.Fatalf("Resume: %v", err)
			}
			after := mustNext(t, g)
			p := mustDecode(t, g, after)
			if after <= before || p.WorkerID != 7 || !p.Time.After(floor) || g.WorkerID() != 7 {
				t.Errorf("after Resume(7, %v): ID %d %+v (before: %d), WorkerID() = %d", floor, after, p, before, g.WorkerID())
			}
			if c.Slept() != 4*time.Millisecond {
				t.Errorf("slept %v waiting for the floor, want 4ms", c.Slept())
			}
		})
	}
}

func TestGenerator_Resume_MovesToALaterMillisecond(t *testing.T) {
	// A lower worker ID in the same millisecond would give smaller IDs.
	g, c := newTestGenerator(t, t0, Config{WorkerID: 9})
	before := mustNext(t, g)
	if err := g.Resume(2, time.Time{}); err != nil {
		t.Fatal(err)
	}
	after := mustNext(t, g)
	if after <= before {
		t.Errorf("after changing worker 9 to 2, Next = %d, not above %d", after, before)
	}
	if p := mustDecode(t, g, after); !p.Time.Equal(t0.Add(time.Millisecond)) || c.Slept() != time.Millisecond {
		t.Errorf("first ID after Resume: %+v, slept %v", p, c.Slept())
	}
}

func TestGenerator_SetDeadline_StopsOnTheMonotonicClock(t *testing.T) {
	g, c := newTestGenerator(t, t0, Config{})
	g.SetDeadline(t0.Add(10 * time.Millisecond))
	mustNext(t, g)

	// A wall step forward within the deadline is adopted for IDs and does
	// not use up the lease.
	c.StepWall(5 * time.Millisecond)
	mustNext(t, g)

	c.Advance(10 * time.Millisecond)
	if _, err := g.Next(); !errors.Is(err, ErrNoWorkerLease) {
		t.Fatalf("Next at the deadline = %v, want ErrNoWorkerLease", err)
	}
	// Nor does stepping the wall clock back give the lease more time.
	c.StepWall(-2 * time.Hour)
	if _, err := g.Next(); !errors.Is(err, ErrNoWorkerLease) {
		t.Fatalf("Next past the deadline, wall stepped back = %v, want ErrNoWorkerLease", err)
	}
	c.StepWall(2 * time.Hour)

	g.SetDeadline(time.Time{})
	mustNext(t, g)
	g.SetDeadline(c.Wall().Add(-time.Millisecond))
	if _, err := g.Next(); !errors.Is(err, ErrNoWorkerLease) {
		t.Fatalf("Next with a deadline in the past = %v, want ErrNoWorkerLease", err)
	}
	// Absurd deadlines saturate rather than wrap around.
	g.SetDeadline(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	mustNext(t, g)
	g.SetDeadline(time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC))
	if _, err := g.Next(); !errors.Is(err, ErrNoWorkerLease) {
		t.Fatalf("Next with a deadline in year 1 = %v, want ErrNoWorkerLease", err)
	}
}

// A step forward of the wall clock, or a machine resumed after the
// monotonic clock stood still, must not stamp IDs past the deadline: the
// next holder of the worker ID starts after the lease's expiry.
func TestGenerator_SetDeadline_BoundsTimestamps(t *testing.T) {
	tests := []struct {
		name     string
		deadline time.Duration // after t0
		step     time.Duration // wall step forward after the first ID
		ok       bool
	}{
		{"step within the deadline", 10 * time.Millisecond, 9 * time.Millisecond, true},
		{"step onto the deadline", 10 * time.Millisecond, 10 * time.Millisecond, false},
		{"deadline inside a millisecond", 10*time.Millisecond + 500*time.Microsecond, 10 * time.Millisecond, true},
		{"step past a deadline inside a millisecond", 10*time.Millisecond + 500*time.Microsecond, 11 * time.Millisecond, false},
		{"resumed after an hour suspended", time.Minute, time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, c := newTestGenerator(t, t0, Config{})
			g.SetDeadline(t0.Add(tt.deadline))
			first := mustNext(t, g)
			c.StepWall(tt.step)
			id, err := g.Next()
			if !tt.ok {
				if !errors.Is(err, ErrNoWorkerLease) {
					t.Fatalf("Next after a %v step with the deadline at +%v = %d, %v; want ErrNoWorkerLease", tt.step, tt.deadline, id, err)
				}
				if err := g.check(); !errors.Is(err, ErrNoWorkerLease) {
					t.Errorf("check = %v, want ErrNoWorkerLease", err)
				}
				return
			}
			if err != nil || id <= first {
				t.Fatalf("Next after a %v step with the deadline at +%v = %d, %v; want an ID above %d", tt.step, tt.deadline, id, err, first)
			}
			if p := mustDecode(t, g, id); !p.Time.Before(t0.Add(tt.deadline)) {
				t.Errorf("ID stamped %v, not before the deadline", p.Time)
			}
		})
	}
}

func TestGenerator_check(t *testing.T) {
	g, c := newTestGenerator(t, t0, Config{})
	if err := g.check(); err != nil {
		t.Fatalf("check on a fresh generator = %v", err)
	}
	mustNext(t, g)
	c.StepWall(-5 * time.Millisecond)
	if err := g.check(); err != nil {
		t.Errorf("check 5ms behind (within MaxBackward) = %v, want nil", err)
	}
	c.StepWall(-time.Millisecond)
	if err := g.check(); !errors.Is(err, ErrClockMovedBackwards) {
		t.Errorf("check 6ms behind = %v, want ErrClockMovedBackwards", err)
	}
	c.StepWall(6 * time.Millisecond)
	g.Pause(ErrLeaseLost)
	if err := g.check(); !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrNoWorkerLease) {
		t.Errorf("check while paused = %v, want ErrNoWorkerLease and the cause", err)
	}
	if c.Slept() != 0 {
		t.Errorf("check slept %v", c.Slept())
	}
}

func TestGenerator_LastTimestamp(t *testing.T) {
	g, c := newTestGenerator(t, t0.Add(300*time.Microsecond), Config{})
	mustNext(t, g)
	if got := g.LastTimestamp(); !got.Equal(t0) {
		t.Errorf("LastTimestamp = %v, want the millisecond %v", got, t0)
	}
	c.Advance(2 * time.Second)
	if got := g.LastTimestamp(); !got.Equal(t0) {
		t.Errorf("LastTimestamp moved to %v without an ID", got)
	}

	// The value persisted by one process is a floor for the next one, even
	// when the next one's clock is behind.
	next, c2 := newTestGenerator(t, t0, Config{NotBefore: g.LastTimestamp()})
	id := mustNext(t, next)
	if got := mustDecode(t, next, id).Time; !got.After(t0) || c2.Slept() != time.Millisecond {
		t.Errorf("restarted generator issued at %v after sleeping %v", got, c2.Slept())
	}
}

func TestGenerator_Decode_RoundTrip(t *testing.T) {
	layouts := []Config{
		{WorkerID: 1023},
		{TimeBits: 41, WorkerBits: 5, SequenceBits: 17, WorkerID: 17},
		{TimeBits: 61, WorkerBits: 1, SequenceBits: 1, WorkerID: 1},
	}
	for _, cfg := range layouts {
		t.Run(fmt.Sprintf("%d/%d/%d", cfg.TimeBits, cfg.WorkerBits, cfg.SequenceBits), func(t *testing.T) {
			g, c := newTestGenerator(t, t0, cfg)
			for i := range 5 {
				c.Advance(time.Duration(i) * 1500 * time.Microsecond)
				ids, err := g.NextN(2)
				if err != nil {
					t.Fatal(err)
				}
				for j, id := range ids {
					p := mustDecode(t, g, id)
					want := Parts{Time: c.Wall().Truncate(time.Millisecond), WorkerID: cfg.WorkerID, Sequence: int64(j)}
					if p != want {
						t.Errorf("Decode(%d) = %+v, want %+v", id, p, want)
					}
					if back, err := g.Layout().Encode(p); err != nil || back != id {
						t.Errorf("Encode(%+v) = %d, %v; want %d", p, back, err, id)
					}
				}
			}
		})
	}
}

// TestGenerator_Next_UniqueAcrossGoroutines runs on the real clock: the
// point is the lock, not time.
func TestGenerator_Next_UniqueAcrossGoroutines(t *testing.T) {
	workers, perWorker := 64, 50_000
	if testing.Short() {
		perWorker = 2_000
	}
	g, err := New(Config{WorkerID: 42})
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ids := make([]int64, 0, perWorker)
			for range perWorker {
				id, err := g.Next()
				if err != nil {
					t.Error(err)
					return
				}
				ids = append(ids, id)
			}
			got[w] = ids
		})
	}
	wg.Wait()

	all := make([]int64, 0, workers*perWorker)
	for w, ids := range got {
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("goroutine %d: ID %d = %d is not above %d", w, i, ids[i], ids[i-1])
			}
		}
		all = append(all, ids...)
	}
	if len(all) != workers*perWorker {
		t.Fatalf("got %d IDs, want %d", len(all), workers*perWorker)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d issued twice", all[i])
		}
	}
	if all[0] < 0 {
		t.Fatalf("negative ID %d", all[0])
	}
	if r := g.rounds(); r != uint64(len(all)) {
		t.Errorf("%d lock rounds for %d calls to Next", r, len(all))
	}
}

// A floor the generator was given (a lease's last timestamp, a fence's
// hold) ahead of the clock reads as ErrFloorAhead, still matching
// ErrClockMovedBackwards; once the generator has issued past it, a clock
// that steps back is a clock that moved backwards, and nothing else.
func TestGenerator_FloorAheadIsNotTheClock(t *testing.T) {
	floor := t0.Add(time.Second)
	g, c := newTestGenerator(t, t0, Config{NotBefore: floor})
	_, err := g.Next()
	if !errors.Is(err, ErrFloorAhead) || !errors.Is(err, ErrClockMovedBackwards) || !strings.Contains(err.Error(), "fence") {
		t.Fatalf("Next below a given floor = %v; want ErrFloorAhead that also matches ErrClockMovedBackwards and names the fence", err)
	}
	if err := g.check(); !errors.Is(err, ErrFloorAhead) {
		t.Fatalf("check below a given floor = %v; want ErrFloorAhead", err)
	}
	c.Advance(time.Second + 2*time.Millisecond)
	mustNext(t, g)
	c.StepWall(-time.Second)
	if _, err := g.Next(); !errors.Is(err, ErrClockMovedBackwards) || errors.Is(err, ErrFloorAhead) {
		t.Fatalf("Next after its own IDs with the clock stepped back = %v; want ErrClockMovedBackwards only", err)
	}
}
