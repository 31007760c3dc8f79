package segment

import "testing"

func TestWatermark(t *testing.T) {
	type call struct {
		begin bool  // begin a call (index = order of begins); else end call #n
		n     int   // which call ends
		r     Range // its range; Start == End means it failed
		want  bool  // regression expected at end
	}
	rg := func(a, b int64) Range { return Range{Start: a, End: b} }
	for _, tc := range []struct {
		name  string
		calls []call
	}{
		{"sequential", []call{
			{begin: true}, {n: 0, r: rg(0, 10)},
			{begin: true}, {n: 1, r: rg(10, 20)},
		}},
		{"below what was reserved before the call", []call{
			{begin: true}, {n: 0, r: rg(10, 20)},
			{begin: true}, {n: 1, r: rg(0, 10), want: true},
		}},
		{"concurrent calls finish out of order", []call{
			{begin: true}, {begin: true},
			{n: 1, r: rg(20, 30)}, {n: 0, r: rg(10, 20)},
		}},
		{"rollback during a call: overlaps a range returned meanwhile", []call{
			{begin: true}, {begin: true},
			{n: 1, r: rg(10, 20)}, {n: 0, r: rg(10, 20), want: true},
		}},
		{"failed calls leave nothing behind", []call{
			{begin: true}, {n: 0, r: rg(0, 0)},
			{begin: true}, {n: 1, r: rg(0, 10)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w watermark
			var started []struct {
				high int64
				at   uint64
			}
			for i, c := range tc.calls {
				if c.begin {
					h, at := w.begin()
					started = append(started, struct {
						high int64
						at   uint64
					}{h, at})
					continue
				}
				s := started[c.n]
				ok := c.r.Start != c.r.End
				if got := w.end(s.high, s.at, c.r, ok); got != c.want {
					t.Fatalf("step %d: end(%v) regression = %v, want %v", i, c.r, got, c.want)
				}
			}
			if len(w.log) != 0 || len(w.inflight) != 0 {
				t.Fatalf("with no call in flight, %d ranges logged and %d calls in flight", len(w.log), len(w.inflight))
			}
		})
	}
}
