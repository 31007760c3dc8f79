package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/idgen/idgen/internal/storetest"
)

func TestIdempotency_Conformance(t *testing.T) {
	storetest.RunIdempotency(t, open(t, filepath.Join(t.TempDir(), "idgen.db")).Idempotency())
}

func BenchmarkIdempotency(b *testing.B) {
	st := open(b, filepath.Join(b.TempDir(), "idgen.db"))
	storetest.BenchIdempotency(b, st, st.Idempotency())
}
