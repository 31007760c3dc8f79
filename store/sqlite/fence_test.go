package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/idgen/idgen/fence"
	"github.com/idgen/idgen/internal/storetest"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/sqlite"
)

func TestStore_Fencing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idgen.db")
	storetest.Fencing(t, func(t *testing.T) storetest.Store { return open(t, path) })
}

// A file put back from an older copy while every process was stopped:
// the process that starts next finds the sidecar ahead of the file,
// fences, and hands out none of the IDs issued since the copy.
func TestStore_RestoredFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "idgen.db")
	ctx := context.Background()
	run := func(create bool) (ids []int64, fences int64) {
		s, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Migrate(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.ConfigureFence(fence.Config{Margin: 10_000}, nil); err != nil {
			t.Fatal(err)
		}
		var n atomic.Int64
		s.ObserveFences(func(fence.Event) { n.Add(1) })
		if create {
			if err := s.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1, Step: 100}); err != nil {
				t.Fatal(err)
			}
		}
		a, err := segment.New(s, &segment.Options{FixedStep: true})
		if err != nil {
			t.Fatal(err)
		}
		ids, err = a.NextN(ctx, "order", 1000)
		if err != nil {
			t.Fatal(err)
		}
		// Close hands the unused end back: the copy and the restore then
		// differ only by what was issued.
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		return ids, n.Load()
	}
	first, _ := run(true)
	copyFile(t, path, path+".copy")
	second, _ := run(false)
	copyFile(t, path+".copy", path)
	third, fences := run(false)
	all := append(append(append([]int64{}, first...), second...), third...)
	if d := segmenttest.Duplicates(all); d != 0 {
		t.Fatalf("%d duplicates among %d IDs across the restore", d, len(all))
	}
	if fences != 1 {
		t.Fatalf("%d fences after the restore, want 1", fences)
	}
	if _, fences := run(false); fences != 0 {
		t.Fatalf("the next process fenced again (%d)", fences)
	}
}

// copyFile copies a closed SQLite database, whose WAL the last close has
// checkpointed and removed.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(from + suffix); err == nil {
			t.Fatalf("%s%s exists: the database was not closed cleanly", from, suffix)
		}
	}
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
