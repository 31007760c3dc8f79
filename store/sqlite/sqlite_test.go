package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/sqlite"
	"github.com/idgen/idgen/store/storetest"
)

func open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStore_Conformance(t *testing.T) {
	t.Parallel()
	s := open(t, "sqlite://"+filepath.Join(t.TempDir(), "idgen.db"))
	segmenttest.Run(t, func(t *testing.T) segment.Store { return s })
}

// Two processes may share one file: each opens its own pool, as a second
// `idgen serve` on the same host would, and BEGIN IMMEDIATE must keep
// their ranges apart. -short takes a quarter of the IDs: 400 contended
// reservations, not 1,600.
func TestStore_TwoPoolsOneFile(t *testing.T) {
	t.Parallel()
	perCaller := 2000
	if testing.Short() {
		perCaller = 500
	}
	path := filepath.Join(t.TempDir(), "shared.db")
	ctx := context.Background()
	s1, s2 := open(t, path), open(t, path)
	if err := s1.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1, Step: 10}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	for _, s := range []*sqlite.Store{s1, s2} {
		a, err := segment.New(s, segment.Options{FixedStep: true})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		for range 4 {
			wg.Go(func() {
				ids, err := a.NextN(ctx, "order", perCaller)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if d := segmenttest.Duplicates(all); d != 0 || len(all) != 8*perCaller {
		t.Fatalf("%d IDs, %d duplicates; want %d and 0", len(all), d, 8*perCaller)
	}
	// Two processes tick one file and one sidecar: no false fence.
	if n := storetest.Fences(t, s1.DB()); n != 0 {
		t.Fatalf("%d fences on a file that lost nothing", n)
	}
}

func TestMigrate_IsIdempotent(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "m.db"))
	v, err := s.Migrate(context.Background(), nil)
	if err != nil || v < 1 {
		t.Fatalf("second Migrate = %d, %v; want version >= 1 and no error", v, err)
	}
}

// Every connection of the pool commits durably: synchronous=FULL (2) in
// WAL mode, so a committed reservation survives a power loss.
func TestOpen_DurablePragmas(t *testing.T) {
	t.Parallel()
	s := open(t, "sqlite://"+filepath.Join(t.TempDir(), "idgen.db"))
	ctx := context.Background()
	var conns []*sql.Conn
	for range 4 { // held at once, so they are distinct connections
		c, err := s.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		var sync int
		var mode string
		if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if sync != 2 || mode != "wal" {
			t.Fatalf("connection %d: synchronous=%d journal_mode=%s, want 2 (FULL) and wal", i, sync, mode)
		}
		_ = c.Close()
	}
}

func TestStore_Regression(t *testing.T) {
	t.Parallel()
	s := open(t, "sqlite://"+filepath.Join(t.TempDir(), "idgen.db"))
	segmenttest.Regression(t, s, func(ctx context.Context, tag string, maxID int64) error {
		_, err := s.DB().ExecContext(ctx, "UPDATE id_sequence SET max_id = ? WHERE biz_tag = ?", maxID, tag)
		return err
	}, func() int64 { return storetest.Fences(t, s.DB()) })
}

// A database that lives in memory is lost with its connection: Open
// refuses every form of it, and says to use a file.
func TestOpen_RefusesInMemory(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{":memory:", "sqlite://:memory:", "file::memory:", "file::memory:?cache=shared",
		"sqlite://file::memory:?cache=shared", "sqlite://./x.db?mode=memory", "file:x.db?mode=memory&cache=shared", "sqlite:///x.db?vfs=memdb"} {
		st, err := sqlite.Open(context.Background(), dsn)
		if err == nil {
			_ = st.Close()
		}
		if !errors.Is(err, sqlite.ErrInMemory) || !strings.Contains(err.Error(), "use a file") {
			t.Errorf("Open(%q) = %v; want ErrInMemory, saying to use a file", dsn, err)
		}
	}
}
