package idgen

import (
	"fmt"
	"strconv"
)

// CheckTag returns nil if name is a valid tag (ValidTag), and otherwise
// ErrInvalidTag with the one rule name breaks, for tags that come from
// elsewhere: Leaf's biz_tag may be up to 128 characters of anything, and
// such a tag is refused with the reason rather than served under another
// name.
func CheckTag(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the tag is empty", ErrInvalidTag)
	case len(name) > 64:
		return fmt.Errorf("%w: the tag is %d bytes, more than 64", ErrInvalidTag, len(name))
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is a path segment, not a tag", ErrInvalidTag, name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c != '.' && !ValidTag(name[i:i+1]) {
			return fmt.Errorf("%w: byte %d of %q is %s",
				ErrInvalidTag, i+1, name, strconv.QuoteRune(rune(c)))
		}
	}
	return nil
}
