package store_test

import (
	"strings"
	"testing"

	"github.com/idgen/idgen/store"
)

// The exported table names are the engine's, and anything else is
// refused with the choices.
func TestCheckTable(t *testing.T) {
	for _, name := range []string{"", store.IDSequence, store.LeafAlloc} {
		if err := store.CheckTable(name); err != nil {
			t.Errorf("CheckTable(%q): %v", name, err)
		}
	}
	if err := store.CheckTable("tiny_id_info"); err == nil || !strings.Contains(err.Error(), store.LeafAlloc) {
		t.Errorf("CheckTable(tiny_id_info) = %v, want an error naming the choices", err)
	}
}
