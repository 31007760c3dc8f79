package sqlite_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/store/sqlite"
)

// OpenTable takes the table by name, a string any caller can write; a
// name it does not know is refused before the file is touched.
func TestOpenTable_Names(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		table   string
		wantErr string
	}{
		{"id_sequence", ""},
		{"leaf_alloc", ""},
		{"", ""},
		{"tiny_id_info", "leaf_alloc"},
	} {
		t.Run(tc.table, func(t *testing.T) {
			st, err := sqlite.OpenTable(ctx, filepath.Join(t.TempDir(), "idgen.db"), tc.table)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("OpenTable(%q) = %v, want an error naming %s", tc.table, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenTable(%q): %v", tc.table, err)
			}
			_ = st.Close()
		})
	}
}

// Leaf's leaf_alloc may hold NULL in update_time (its DDL has no NOT
// NULL there on every database); listing such a row must not fail.
func TestOpenTable_LeafAllocNullUpdateTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.OpenTable(ctx, filepath.Join(t.TempDir(), "leaf.db"), "leaf_alloc")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE leaf_alloc (biz_tag VARCHAR(128) NOT NULL PRIMARY KEY,
		max_id BIGINT NOT NULL DEFAULT 1, step INT NOT NULL, description VARCHAR(256) DEFAULT NULL, update_time TIMESTAMP NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, `INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time) VALUES ('leaf-null', 7, 10, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Migrate(ctx, nil); err != nil { // idgen's own tables beside Leaf's
		t.Fatal(err)
	}
	tags, err := st.ListTags(ctx)
	if err != nil || len(tags) != 1 || tags[0].Name != "leaf-null" || tags[0].MaxID != 7 || !tags[0].UpdatedAt.IsZero() {
		t.Fatalf("ListTags = %+v, %v; want leaf-null at 7 with no update time", tags, err)
	}
}

// Import is all or nothing: a row the database refuses halfway leaves
// none of the batch behind, and a row whose max_id leaves no room for a
// step is refused before anything is written.
func TestStore_ImportAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "import.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, `CREATE TRIGGER refuse_boom BEFORE INSERT ON id_sequence WHEN NEW.biz_tag = 'boom'
		BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
		t.Fatal(err)
	}
	for _, batch := range [][]segment.Tag{
		{{Name: "first", MaxID: 10, Step: 100}, {Name: "boom", MaxID: 10, Step: 100}},
		{{Name: "first", MaxID: 10, Step: 100}, {Name: "near-limit", MaxID: math.MaxInt64 - 807, Step: 1000}},
	} {
		if _, err := st.Import(ctx, batch); err == nil {
			t.Fatalf("Import(%v) succeeded", batch)
		}
		if tags, err := st.ListTags(ctx); err != nil || len(tags) != 0 {
			t.Fatalf("after a failed import the store holds %v (%v); want nothing", tags, err)
		}
	}
	if err := st.CreateTag(ctx, segment.Tag{Name: "old", MaxID: 500, Step: 10}); err != nil {
		t.Fatal(err)
	}
	before, err := st.Import(ctx, []segment.Tag{{Name: "first", MaxID: 10, Step: 100}, {Name: "old", MaxID: 900, Step: 10}, {Name: "old", MaxID: 100, Step: 10}})
	if err != nil || len(before) != 3 || before[0] != -1 || before[1] != 500 || before[2] != 900 {
		t.Fatalf("Import = %v, %v; want [-1 500 900]", before, err)
	}
}
