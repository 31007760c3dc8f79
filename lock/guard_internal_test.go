package lock

import (
	"os"
	"strings"
	"testing"
)

// TestGuard_DocumentedDDL keeps docs/locks.md's DDL for the side table,
// which teams paste into their own migrations, the one CreateTable runs.
func TestGuard_DocumentedDDL(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/locks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []Dialect{Postgres, MySQL, SQLite} {
		g, err := NewGuard(GuardConfig{Dialect: d})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), g.create+"\n") {
			t.Errorf("docs/locks.md lacks %s's DDL as CreateTable runs it:\n%s", d, g.create)
		}
	}
}
