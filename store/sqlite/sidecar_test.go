package sqlite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idgen/idgen/store/fence"
)

// The sidecar keeps the furthest position of one record whatever order
// processes write in, keeps a newer record over an older one, and
// refuses a file that is not one.
func TestSidecar_Merge(t *testing.T) {
	t.Parallel()
	p := sidecar(filepath.Join(t.TempDir(), "idgen.db.fence"))
	mem := func(gen int64, ticks string) fence.Memory {
		return fence.Memory{}.Observe(fence.Identity{Kind: fence.SQLite, System: "s1", Position: ticks},
			fence.Record{Identity: fence.Identity{Kind: fence.SQLite, System: "s1"}, Generation: gen})
	}
	if m, err := p.load(); err != nil || m.Known {
		t.Fatalf("missing sidecar: %+v, %v; want an empty memory", m, err)
	}
	for _, step := range []struct {
		m     fence.Memory
		gen   int64
		ticks string
	}{
		{mem(5, "10"), 5, "10"},
		{mem(5, "9"), 5, "10"},  // a slower process's write
		{mem(4, "99"), 5, "10"}, // from before a fence another process wrote
		{mem(6, "2"), 6, "2"},   // a new record starts afresh
	} {
		if err := p.save(step.m); err != nil {
			t.Fatal(err)
		}
		got, err := p.load()
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != step.gen || got.Positions[""] != step.ticks {
			t.Fatalf("after saving gen %d ticks %s: gen %d ticks %s, want %d and %s",
				step.m.Generation, step.m.Positions[""], got.Generation, got.Positions[""], step.gen, step.ticks)
		}
	}
	if err := os.WriteFile(string(p), []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.load(); err == nil || !strings.Contains(err.Error(), "fence sidecar") {
		t.Fatalf("a foreign file: %v, want an error naming the sidecar", err)
	}
}
