package dedupcheck

import "slices"

// Result is what the verifier found of one run.
type Result struct {
	// Messages is how many were sent.
	Messages int
	// Twice lists the messages whose effect was committed more than
	// once; Lost those with none; Unknown effects of no message sent.
	Twice, Lost, Unknown []string
}

// OK reports whether every message's effect is there exactly once.
func (r Result) OK() bool {
	return len(r.Twice) == 0 && len(r.Lost) == 0 && len(r.Unknown) == 0
}

// Verify compares the effects committed, counted by message ID, with
// the messages sent.
func Verify(sent []string, effects map[string]int) Result {
	r := Result{Messages: len(sent)}
	seen := make(map[string]bool, len(sent))
	for _, id := range sent {
		seen[id] = true
		switch n := effects[id]; {
		case n == 0:
			r.Lost = append(r.Lost, id)
		case n > 1:
			r.Twice = append(r.Twice, id)
		}
	}
	for id := range effects {
		if !seen[id] {
			r.Unknown = append(r.Unknown, id)
		}
	}
	slices.Sort(r.Unknown)
	return r
}
