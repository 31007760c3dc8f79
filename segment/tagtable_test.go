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
