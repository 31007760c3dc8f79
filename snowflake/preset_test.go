package snowflake_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idgen/idgen/snowflake"
	"github.com/idgen/idgen/snowflake/snowflaketest"
)

func TestParseLayout(t *testing.T) {
	idgenEpoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	twitter := time.UnixMilli(1288834974657).UTC()
	tests := []struct {
		layout, epoch string
		wantEpoch     time.Time
		bits          [3]int
	}{
		{"", "", idgenEpoch, [3]int{41, 10, 12}},
		{"idgen", "", idgenEpoch, [3]int{41, 10, 12}},
		{"leaf", "", twitter, [3]int{41, 10, 12}},
		{"twitter", "", twitter, [3]int{41, 10, 12}},
		{"Leaf", "", twitter, [3]int{41, 10, 12}},
		{"39/8/16", "", idgenEpoch, [3]int{39, 8, 16}},
		{"leaf", "2015-01-01T00:00:00Z", time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC), [3]int{41, 10, 12}},
		{"41/10/12", "1420070400000", time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC), [3]int{41, 10, 12}},
	}
	for _, tt := range tests {
		l, err := snowflake.ParseLayout(tt.layout, tt.epoch)
		if err != nil {
			t.Errorf("ParseLayout(%q, %q): %v", tt.layout, tt.epoch, err)
			continue
		}
		if got := [3]int{l.TimeBits(), l.WorkerBits(), l.SequenceBits()}; got != tt.bits || !l.Epoch().Equal(tt.wantEpoch) {
			t.Errorf("ParseLayout(%q, %q) = %v from %v, want %v from %v", tt.layout, tt.epoch, got, l.Epoch(), tt.bits, tt.wantEpoch)
		}
	}
	for _, bad := range [][2]string{{"41/10", ""}, {"41/10/13", ""}, {"a/b/c", ""}, {"sonyflake", ""}, {"0/51/12", ""},
		{"leaf", "yesterday"}, {"leaf", "-5"}, {"leaf", "0"}} {
		if _, err := snowflake.ParseLayout(bad[0], bad[1]); !errors.Is(err, snowflake.ErrInvalidConfig) {
			t.Errorf("ParseLayout(%q, %q) = %v, want ErrInvalidConfig", bad[0], bad[1], err)
		}
	}
}

// IDs of the leaf preset decode with Leaf's own formula,
// (id >> 22) + 1288834974657, to the millisecond they were issued in, and
// with its worker and sequence formulas to the generator's.
func TestLeafPreset_DecodesWithLeafsFormula(t *testing.T) {
	l, err := snowflake.ParseLayout("leaf", "")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 3, 4, 5, 678_000_000, time.UTC)
	cfg := l.Config()
	cfg.WorkerID = 39
	cfg.Clock = snowflaketest.NewClock(at)
	g, err := snowflake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := g.NextN(5)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		ms := (id >> 22) + 1288834974657
		worker := (id >> 12) ^ (id >> 22 << 10)
		seq := id ^ (id >> 12 << 12)
		if ms != at.UnixMilli() || worker != 39 || seq != int64(i) {
			t.Errorf("ID %d: Leaf's formulas give %d ms, worker %d, sequence %d; want %d, 39, %d", id, ms, worker, seq, at.UnixMilli(), i)
		}
		p, _ := l.Decode(id)
		if !p.Time.Equal(at) || p.WorkerID != 39 || p.Sequence != int64(i) {
			t.Errorf("Decode(%d) = %+v", id, p)
		}
	}
}

func TestParseWorkerRange(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want snowflake.WorkerRange
	}{
		{"", snowflake.WorkerRange{}},
		{"512-1023", snowflake.WorkerRange{From: 512, To: 1024}},
		{"0-0", snowflake.WorkerRange{From: 0, To: 1}},
		{" 7 - 9 ", snowflake.WorkerRange{From: 7, To: 10}},
	} {
		got, err := snowflake.ParseWorkerRange(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseWorkerRange(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if tt.in != "" && got.String() == "" {
			t.Errorf("%v.String() is empty", got)
		}
	}
	for _, bad := range []string{"5", "9-3", "-1-4", "a-b", "1-"} {
		if _, err := snowflake.ParseWorkerRange(bad); !errors.Is(err, snowflake.ErrInvalidConfig) {
			t.Errorf("ParseWorkerRange(%q) = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func TestNewLeased_WorkerRangeOutsideLayout(t *testing.T) {
	clock := snowflaketest.NewClock(start)
	for _, wr := range []snowflake.WorkerRange{{From: 1000, To: 1025}, {From: 5, To: 5}} {
		_, err := snowflake.NewLeased(context.Background(), snowflaketest.NewMemory(),
			snowflake.LeasedConfig{Generator: snowflake.Config{Clock: clock}, WorkerRange: wr})
		if !errors.Is(err, snowflake.ErrInvalidConfig) {
			t.Errorf("WorkerRange %+v: %v, want ErrInvalidConfig", wr, err)
		}
	}
}

// A Leaf or Twitter snowflake ID decodes with the leaf preset.
func ExampleParseLayout() {
	l, err := snowflake.ParseLayout("leaf", "")
	if err != nil {
		panic(err)
	}
	p, _ := l.Decode(1169786042799259000)
	fmt.Println(p.Time.UnixMilli(), p.WorkerID, p.Sequence)
	// Output: 1567733700834 39 3448
}

// A static worker ID must lie inside the worker range given beside it:
// the range keeps the process clear of IDs other generators hold.
func TestNewLeased_StaticOutsideWorkerRange(t *testing.T) {
	st := snowflaketest.NewMemory()
	for _, tc := range []struct {
		id   int64
		wr   snowflake.WorkerRange
		fail bool
	}{
		{5, snowflake.WorkerRange{From: 0, To: 10}, false},
		{12, snowflake.WorkerRange{From: 0, To: 10}, true},
		{3, snowflake.WorkerRange{From: 4, To: 8}, true},
		{900, snowflake.WorkerRange{}, false}, // no range: any worker ID of the layout
	} {
		l, err := snowflake.NewLeased(context.Background(), st, snowflake.LeasedConfig{
			Static: true, Generator: snowflake.Config{WorkerID: tc.id}, WorkerRange: tc.wr, RenewInterval: -1,
		})
		if tc.fail != errors.Is(err, snowflake.ErrInvalidConfig) {
			t.Errorf("static %d in %v: err = %v, want ErrInvalidConfig: %v", tc.id, tc.wr, err, tc.fail)
		}
		if l != nil {
			_ = l.Shutdown(context.Background())
		}
	}
}
