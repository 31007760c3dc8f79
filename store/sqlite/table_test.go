package sqlite_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idgen/idgen/store/sqlite"
)

// OpenTable takes the table by name, a string any caller can write; a
// name it does not know is refused before the file is touched.
func TestOpenTable_Names(t *testing.T) {
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
	tags, err := st.ListTags(ctx)
	if err != nil || len(tags) != 1 || tags[0].Name != "leaf-null" || tags[0].MaxID != 7 || !tags[0].UpdatedAt.IsZero() {
		t.Fatalf("ListTags = %+v, %v; want leaf-null at 7 with no update time", tags, err)
	}
}
