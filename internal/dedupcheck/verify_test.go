package dedupcheck

import (
	"slices"
	"testing"
)

func TestVerify(t *testing.T) {
	cases := []struct {
		name                 string
		sent                 []string
		effects              map[string]int
		twice, lost, unknown []string
	}{
		{name: "exactly once", sent: []string{"1", "2"}, effects: map[string]int{"1": 1, "2": 1}},
		{name: "twice", sent: []string{"1", "2"}, effects: map[string]int{"1": 2, "2": 1}, twice: []string{"1"}},
		{name: "lost", sent: []string{"1", "2"}, effects: map[string]int{"2": 1}, lost: []string{"1"}},
		{name: "unknown", sent: []string{"1"}, effects: map[string]int{"1": 1, "9": 1}, unknown: []string{"9"}},
	}
	for _, c := range cases {
		r := Verify(c.sent, c.effects)
		if !slices.Equal(r.Twice, c.twice) || !slices.Equal(r.Lost, c.lost) || !slices.Equal(r.Unknown, c.unknown) {
			t.Errorf("%s: got %+v", c.name, r)
		}
		if r.OK() != (len(c.twice)+len(c.lost)+len(c.unknown) == 0) {
			t.Errorf("%s: OK %v", c.name, r.OK())
		}
	}
}
