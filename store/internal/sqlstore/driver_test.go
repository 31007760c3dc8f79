package sqlstore

import (
	"context"
	"strings"
	"sync"
	"testing"
)

var fakeOnce sync.Once

// A DSN names its backend by scheme, or by a form a driver claims; one
// that names none is refused with the forms that work, and one whose
// backend is not linked in says which package to import.
func TestLookup(t *testing.T) {
	registered := Driver{Name: "fake", Schemes: []string{"fake"}, Bare: func(dsn string) (bool, error) { return strings.HasPrefix(dsn, "k="), nil },
		Check: func(string) error { return nil }, Open: func(context.Context, string) (*Conn, error) { return nil, nil }}
	fakeOnce.Do(func() { Register(registered) }) // drivers are process-wide: once under -count
	for _, tc := range []struct{ dsn, driver, err string }{
		{"fake://x", "fake", ""},
		{"k=v", "fake", ""},
		{"redis://h", "", `unsupported store "redis://": use sqlite://PATH`},
		{"sqlite:/idgen.db", "", "sqlite needs :// after it"},
		{"root:S3cret@tcp(127.0.0.1:3306)/idgen", "", "the DSN has no scheme"},
	} {
		d, err := Lookup(tc.dsn)
		if tc.err == "" && (err != nil || d.Name != tc.driver) {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tc.dsn, d.Name, err, tc.driver)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Lookup(%q) = %q, %v; want an error with %q", tc.dsn, d.Name, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), "S3cret") {
			t.Errorf("Lookup(%q) repeats the password: %v", tc.dsn, err)
		}
	}
	if _, err := Named("fake"); err != nil {
		t.Errorf("Named(fake): %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second driver for scheme fake:// was registered")
		}
	}()
	Register(Driver{Name: "fake2", Schemes: []string{"fake"}})
}
