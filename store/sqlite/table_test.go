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
