package fence_test

import (
	"context"
	"slices"
	"testing"

	"github.com/idgen/idgen/store/fence"
)

// raises is a fence.Tx that records the witness raises it is asked for;
// the protocol's other primitives are not reached by Witness.
type raises struct {
	fence.Tx
	got []string
}

func (r *raises) Raise(_ context.Context, tag string, _ int64) error {
	r.got = append(r.got, tag)
	return nil
}

func TestHighWater_Went(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		maxID int64
		hand  bool // a hand-back of 70..100 in flight
		want  bool
	}{
		{"row at the mark", 100, false, false},
		{"row above the mark", 150, false, false},
		{"row below the mark: the store went back", 99, false, true},
		{"row at the start of a hand-back in flight", 70, true, false},
		{"row below a hand-back in flight", 60, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h fence.HighWater
			h.Reserve("a", 50)
			h.Reserve("a", 100)
			h.Reserve("a", 80) // never lowers the mark
			if tc.hand {
				defer h.Releasing("a", 70, 100)(false)
			}
			if went, hw := h.Went("a", tc.maxID); went != tc.want || hw != 100 {
				t.Fatalf("Went(a, %d) = %v, %d; want %v, 100", tc.maxID, went, hw, tc.want)
			}
		})
	}
}

func TestHighWater_ReleasingLowersTheMark(t *testing.T) {
	t.Parallel()
	var h fence.HighWater
	h.Reserve("a", 100)
	h.Releasing("a", 70, 100)(true)
	if went, hw := h.Went("a", 70); went || hw != 70 {
		t.Fatalf("after a hand-back of 70..100, Went(a, 70) = %v, %d; want false, 70", went, hw)
	}
	h.Releasing("a", 60, 65)(true) // not the highest range: the mark stays
	if _, hw := h.Went("a", 70); hw != 70 {
		t.Fatalf("mark %d after handing back a lower range; want 70", hw)
	}
}

// The witness raise moves every tag the process reserved, in name order,
// once per new generation.
func TestWitness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var h fence.HighWater
	h.Reserve("b", 20)
	h.Reserve("a", 10)
	tx := &raises{}
	gen, err := fence.Witness(ctx, tx, &h, 5)
	if err != nil || gen != 5 || !slices.Equal(tx.got, []string{"a", "b"}) {
		t.Fatalf("Witness = %d, %v, raised %v; want 5, nil, [a b]", gen, err, tx.got)
	}
	h.Witnessed(gen)
	tx.got = nil
	if gen, err := fence.Witness(ctx, tx, &h, 5); err != nil || gen != 0 || len(tx.got) != 0 {
		t.Fatalf("second Witness of generation 5 = %d, %v, raised %v; want 0, nil, none", gen, err, tx.got)
	}
	if gen, err := fence.Witness(ctx, tx, nil, 9); err != nil || gen != 0 {
		t.Fatalf("Witness with no HighWater = %d, %v; want 0, nil", gen, err)
	}
}
