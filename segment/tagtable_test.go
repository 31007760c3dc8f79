package segment

import (
	"fmt"
	"testing"
)

// Every tag stored is found, before and after promotion, deletes take
// only the Sequence given, and all lists each tag once.
func TestTagTable_StorePromoteDelete(t *testing.T) {
	var tt tagTable
	tt.init()
	seqs := map[string]*Sequence{}
	for i := range 100 {
		tag := fmt.Sprintf("t%d", i)
		s := &Sequence{tag: tag}
		if got, loaded := tt.loadOrStore(tag, s); loaded || got != s {
			t.Fatalf("store %s: %p loaded %v", tag, got, loaded)
		}
		if got, loaded := tt.loadOrStore(tag, &Sequence{tag: tag}); !loaded || got != s {
			t.Fatalf("store %s again: %p loaded %v, want the first", tag, got, loaded)
		}
		seqs[tag] = s
		// Look every tag up a few times: recent is promoted on the way.
		for range 3 {
			for k, want := range seqs {
				if got, ok := tt.load(k); !ok || got != want {
					t.Fatalf("load %s: %p %v", k, got, ok)
				}
			}
		}
	}
	if r := tt.snapshot(); len(r) == 0 {
		t.Fatal("nothing was promoted into the read map")
	}
	if tt.compareAndDelete("t7", &Sequence{}) {
		t.Fatal("deleted t7 with another Sequence")
	}
	if !tt.compareAndDelete("t7", seqs["t7"]) {
		t.Fatal("t7 not deleted")
	}
	delete(seqs, "t7")
	if _, ok := tt.load("t7"); ok {
		t.Fatal("t7 found after its delete")
	}
	if all := tt.all(); len(all) != len(seqs) {
		t.Fatalf("all: %d Sequences, want %d", len(all), len(seqs))
	}
	if _, ok := tt.load("nope"); ok {
		t.Fatal("an unknown tag found")
	}
}

// The index finds every tag and no other, whatever the tags' lengths,
// and falls back to the map when tags alike at both ends would make a
// probe run longer than maxProbe.
func TestIndex(t *testing.T) {
	long := func(i int) string { return fmt.Sprintf("tenant-a-%06d-orders-eu", i) } // alike in length and in 8 bytes at each end
	for _, tc := range []struct {
		name  string
		tags  []string
		probe bool // whether the index has slots
	}{
		{"empty", nil, false},
		{"one short tag", []string{"order"}, true},
		{"every length to 20", func() []string {
			var out []string
			for n := 1; n <= 20; n++ {
				out = append(out, "abcdefghijklmnopqrst"[:n])
			}
			return out
		}(), true},
		{"a thousand tags", func() []string {
			var out []string
			for i := range 1000 {
				out = append(out, fmt.Sprintf("t%d", i))
			}
			return out
		}(), true},
		{"long tags alike at both ends", func() []string {
			var out []string
			for i := range 10 {
				out = append(out, long(i))
			}
			return out
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]*Sequence{}
			for _, tag := range tc.tags {
				m[tag] = &Sequence{tag: tag}
			}
			x := newIndex(m)
			if got := x.slots != nil; got != tc.probe {
				t.Fatalf("slots in use: %v, want %v", got, tc.probe)
			}
			for _, tag := range tc.tags {
				if got := x.get(tag); got != m[tag] {
					t.Fatalf("get(%q) = %p, want %p", tag, got, m[tag])
				}
			}
			for _, tag := range []string{"", "x", "orde", "orders", "order ", long(10), "abcdefghijklmnopqrsu"} {
				if _, ok := m[tag]; !ok && x.get(tag) != nil {
					t.Fatalf("get(%q) found a tag that is not there", tag)
				}
			}
		})
	}
}
