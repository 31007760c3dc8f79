package lockcheck

import (
	"strings"
	"testing"
)

// ev builds events of one owner.
func ev(owner string, es ...Event) []Event {
	for i := range es {
		es[i].Worker, es[i].Owner = owner[:2], owner
	}
	return es
}

func hold(n int, floor, token int64, ids ...int64) []Event {
	es := []Event{{Kind: Acquiring, Hold: n, Floor: floor}, {Kind: Granted, Hold: n, Token: token}}
	for _, id := range ids {
		es = append(es, Event{Kind: Wrote, Hold: n, Token: token, ID: id})
	}
	return es
}

func rows(spec ...any) []Row {
	var out []Row
	for i := 0; i < len(spec); i += 2 {
		out = append(out, Row{ID: int64(len(out) + 1), Owner: spec[i].(string), Token: spec[i+1].(int64)})
	}
	return out
}

func cat(parts ...[]Event) []Event {
	var out []Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestVerify(t *testing.T) {
	released := func(n int, token, floor int64) Event {
		return Event{Kind: Released, Hold: n, Token: token, Floor: floor}
	}
	for _, tc := range []struct {
		name string
		h    History
		want string // a violation's words; "" for none
	}{
		{"clean hand-over", History{
			Events: map[string][]Event{
				"w1-1": ev("w1-1", cat(hold(1, 0, 1, 1, 2), []Event{released(1, 1, 1)})...),
				"w2-2": ev("w2-2", cat(hold(1, 0, 2, 3), []Event{released(1, 2, 2)})...),
			},
			Log: rows("w1-1", int64(1), "w1-1", int64(1), "w2-2", int64(2)),
		}, ""},
		{"paused holder refused and told", History{
			Events: map[string][]Event{
				"w1-1": ev("w1-1", cat(hold(1, 0, 1, 1), []Event{{Kind: Stale, Hold: 1, Token: 1}, {Kind: Lost, Hold: 1, Token: 1, Reason: "expired"},
					{Kind: ReleaseError, Hold: 1, Token: 1, Reason: "expired"}})...),
				"w2-2": ev("w2-2", cat(hold(1, 1, 2, 2), []Event{released(1, 2, 2)})...),
			},
			Log: rows("w1-1", int64(1), "w2-2", int64(2)),
		}, ""},
		{"stale write accepted", History{
			Events: map[string][]Event{},
			Log:    rows("w1-1", int64(1), "w2-2", int64(2), "w1-1", int64(1)),
		}, "stale write accepted"},
		{"two owners of one token", History{
			Events: map[string][]Event{},
			Log:    rows("w1-1", int64(3), "w2-2", int64(3)),
		}, "two holders of token 3"},
		{"grant below the log", History{
			Events: map[string][]Event{"w1-1": ev("w1-1", hold(1, 7, 5)...)},
		}, "not above token 7"},
		{"grant below the worker's last", History{
			Events: map[string][]Event{"w1-1": ev("w1-1", cat(hold(1, 0, 5), []Event{released(1, 5, 0)}, hold(2, 0, 4))...)},
		}, "granted 4 after 5"},
		{"the same grant again after a failed release", History{
			Events: map[string][]Event{"w1-1": ev("w1-1", cat(hold(1, 0, 5, 1), []Event{{Kind: ReleaseError, Hold: 1, Token: 5, Reason: "other"}}, hold(2, 5, 5))...)},
			Log:    rows("w1-1", int64(5)),
		}, ""},
		{"the same grant again after the lease expired", History{
			Events: map[string][]Event{"w1-1": ev("w1-1", cat(hold(1, 0, 5, 1), []Event{{Kind: Lost, Hold: 1, Token: 5, Reason: "expired"},
				{Kind: ReleaseError, Hold: 1, Token: 5, Reason: "expired"}}, hold(2, 5, 5))...)},
			Log: rows("w1-1", int64(5)),
		}, ""},
		{"the same token again after the lease was lost", History{
			Events: map[string][]Event{"w1-1": ev("w1-1", cat(hold(1, 0, 5), []Event{{Kind: ReleaseError, Hold: 1, Token: 5, Reason: "lost"}}, hold(2, 0, 5))...)},
		}, "granted 5 after 5"},
		{"the same token again after a release", History{
			Events: map[string][]Event{"w1-1": ev("w1-1", cat(hold(1, 0, 5), []Event{released(1, 5, 0)}, hold(2, 0, 5))...)},
		}, "granted 5 after 5"},
		{"token granted twice", History{
			Events: map[string][]Event{"w1-1": ev("w1-1", hold(1, 0, 5)...), "w2-2": ev("w2-2", hold(1, 0, 5)...)},
		}, "granted twice"},
		{"lost silently", History{
			Events: map[string][]Event{
				"w1-1": ev("w1-1", cat(hold(1, 0, 1, 1), []Event{released(1, 1, 2)})...),
				"w2-2": ev("w2-2", hold(1, 1, 2, 2)...),
			},
			Log: rows("w1-1", int64(1), "w2-2", int64(2)),
		}, "lost silently"},
		{"lost silently, told by the guard only", History{
			Events: map[string][]Event{
				"w1-1": ev("w1-1", cat(hold(1, 0, 1), []Event{{Kind: Stale, Hold: 1, Token: 1}, released(1, 1, 0)})...),
			},
		}, "lost silently"},
		{"a write the log lacks", History{
			Events: map[string][]Event{"w1-1": ev("w1-1", hold(1, 0, 1, 9)...)},
		}, "log row 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, v := Verify(tc.h)
			if c.Violations != len(v) {
				t.Fatalf("Violations %d, %d violations listed", c.Violations, len(v))
			}
			if tc.want == "" {
				if len(v) != 0 {
					t.Fatalf("violations in a clean history: %q", v)
				}
				return
			}
			for _, s := range v {
				if strings.Contains(s, tc.want) {
					return
				}
			}
			t.Fatalf("violations %q, want one saying %q", v, tc.want)
		})
	}
}
