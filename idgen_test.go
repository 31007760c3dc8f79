package idgen_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/segment"
)

var _ idgen.Generator = (*segment.Allocator)(nil)

func TestCheckTag(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"orders", ""},
		{"leaf.order:v2-x_1", ""},
		{"", "the tag is empty"},
		{strings.Repeat("a", 65), "65 bytes, more than 64"},
		{"..", "path segment"},
		{"order tag", `byte 6 of "order tag" is ' '`},
		{"a/b", `byte 2 of "a/b" is '/'`},
		{"✓", `byte 1 of "✓" is '✓'`},
		{"ordér", `byte 4 of "ordér" is 'é'`},
		{"ab\xff", `byte 3 of "ab\xff" is 0xff, not UTF-8`},
	} {
		err := idgen.CheckTag(tc.name)
		if tc.want == "" {
			if err != nil || !idgen.ValidTag(tc.name) {
				t.Errorf("CheckTag(%q) = %v, want nil", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, idgen.ErrInvalidTag) || !strings.Contains(err.Error(), tc.want) || idgen.ValidTag(tc.name) {
			t.Errorf("CheckTag(%q) = %v, want ErrInvalidTag saying %q", tc.name, err, tc.want)
		}
	}
}
