package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/fence"
	"github.com/idgen/idgen/store/sqlite"
	"github.com/idgen/idgen/store/storetest"
)

func TestStore_Fencing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idgen.db")
	storetest.Fencing(t, func(t *testing.T) storetest.Store { return open(t, path) })
}

func TestStore_Witness(t *testing.T) {
	t.Parallel()
	path := "sqlite://" + filepath.Join(t.TempDir(), "idgen.db")
	storetest.Witness(t, func(t *testing.T) storetest.Store { return open(t, path) })
}

func TestStore_Holes(t *testing.T) {
	if testing.Short() {
		t.Skip("each hole's reproduction waits out fence holds; run without -short")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "holes.db")
	storetest.Holes(t, func(t *testing.T) storetest.Store { return open(t, path) })
}

func TestStore_FenceFloor(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idgen.db")
	storetest.FenceFloor(t, func(t *testing.T) storetest.Store { return open(t, path) })
}

func TestStore_FenceCountsLapsedLeases(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idgen.db")
	storetest.FenceCountsLapsedLeases(t, func(t *testing.T) storetest.Store { return open(t, path) })
}

// A file put back from an older copy while every process was stopped:
// the process that starts next finds the sidecar ahead of the file,
// fences, and hands out none of the IDs issued since the copy.
func TestStore_RestoredFile(t *testing.T) {
	t.Parallel()
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
		a, err := segment.New(s, segment.Options{FixedStep: true})
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

// The sidecar keeps the highest tag floor a process saw, also when it is
// written over an older one: a process that starts after a second loss
// took the first fence with it (the record's floor went back) learns
// from the sidecar what the lost fence added, and adds it to its margin.
func TestStore_SidecarKeepsFloor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idgen.db")
	const margin = 10_000
	start := func() (*sqlite.Store, *atomic.Pointer[fence.Event]) {
		s, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Migrate(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.ConfigureFence(fence.Config{Margin: margin}, nil); err != nil {
			t.Fatal(err)
		}
		var last atomic.Pointer[fence.Event]
		s.ObserveFences(func(ev fence.Event) { last.Store(&ev) })
		if err := s.CheckIdentity(ctx); err != nil {
			t.Fatal(err)
		}
		return s, &last
	}
	exec := func(s *sqlite.Store, q string) {
		t.Helper()
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// The first process records the identity (a sidecar without a
	// floor), then fences a failover: the floor is the margin.
	a, _ := start()
	exec(a, "UPDATE idgen_fence SET store_id = 'another-file' WHERE id = 1")
	if err := a.CheckIdentity(ctx); err != nil {
		t.Fatal(err)
	}
	first := int64(margin * fence.MinFailovers) // the margin per failover counted
	if _, rec, err := a.Identity(ctx); err != nil || rec.Floor != first {
		t.Fatalf("tag floor after the fence: %+v, %v; want %d", rec, err, first)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// The second loss: another file whose record lost that fence.
	b, last := start()
	defer b.Close()
	if ev := last.Load(); ev != nil {
		t.Fatalf("the next process fenced before the loss: %s", ev.Reason)
	}
	exec(b, "UPDATE idgen_fence SET store_id = 'a-third-file', tag_floor = 0 WHERE id = 1")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c, last := start()
	defer c.Close()
	ev := last.Load()
	if ev == nil || ev.Plan.Lost != first || ev.Plan.Margin != margin+first {
		t.Fatalf("fence after the loss of a fence: %+v; want %d lost, margin %d (from the sidecar's floor)", ev, first, margin+first)
	}
}

// copyFile copies a closed SQLite database as a cold backup does: the
// main file and, when present, its WAL. The last close normally
// checkpoints and removes the WAL, but a connection that database/sql
// releases after Close returns (a rolled-back transaction on a busy
// machine) can leave it behind, and it then holds committed pages. A
// stale -shm is dropped: SQLite rebuilds it from the WAL.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(from + suffix)
		switch {
		case suffix != "" && os.IsNotExist(err):
			if err := os.Remove(to + suffix); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			continue
		case err != nil:
			t.Fatal(err)
		}
		if err := os.WriteFile(to+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(to + "-shm"); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// A store on Leaf's leaf_alloc (migrations.UpShared, no id_sequence) has
// the idgen_fence table too, and a fence moves leaf_alloc's rows up.
func TestStore_FencingLeafAlloc(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "leaf.db")
	s, err := sqlite.OpenTable(ctx, path, "leaf_alloc")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE leaf_alloc (biz_tag VARCHAR(128) NOT NULL DEFAULT '' PRIMARY KEY,
		max_id BIGINT NOT NULL DEFAULT 1, step INT NOT NULL, description VARCHAR(256) DEFAULT NULL,
		update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.ConfigureFence(fence.Config{Margin: 5000}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTag(ctx, segment.Tag{Name: "leaf", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, "leaf", 0); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE name = 'id_sequence'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("id_sequence exists (%d, %v): UpShared must not create it", n, err)
	}
	if _, err := s.DB().ExecContext(ctx, `UPDATE idgen_fence SET store_id = 'another-file' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	r, err := s.Reserve(ctx, "leaf", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(11 + 5000*fence.MinFailovers); r.Start != want {
		t.Fatalf("after the fence the range starts at %d, want %d: 11 + the margin 5000 per failover counted", r.Start, want)
	}
}
