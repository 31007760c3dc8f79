package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idgen/idgen/idempotency"
)

// Byte positions in a refused key count from 1, as in a refused tag
// (idgen.CheckTag), so that a caller reads both the same way.
func TestParseKey_BytePositionsFromOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"a,b", "(byte 2)"},
		{`ab"c`, "(byte 3)"},
		{"tab\there", "byte 4 is 0x09"},
		{"x\x7f", "byte 2 is 0x7f"},
	} {
		_, err := idempotency.ParseKey(tc.in)
		if !errors.Is(err, idempotency.ErrInvalidKey) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseKey(%q) = %v, want ErrInvalidKey saying %q", tc.in, err, tc.want)
		}
	}
}
