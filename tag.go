package idgen

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// maxTagLen is the longest tag, in bytes.
const maxTagLen = 64

// CheckTag is the one rule for tag names: it returns nil if name is 1 to
// 64 characters of [A-Za-z0-9_.:-], and otherwise an error wrapping
// ErrInvalidTag that names the rule name breaks. Such names are safe in
// URLs, logs, SQL and JSON without escaping. "." and ".." are refused:
// clients and proxies rewrite them as path segments, so such a tag could
// not be reached reliably. The reason matters for tags that come from
// elsewhere: Leaf's biz_tag may be up to 128 characters of anything, and
// such a tag is refused with the reason rather than served under another
// name.
//
// The error never quotes more than maxTagLen bytes of name, so a huge
// input does not end up whole in a log line.
func CheckTag(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the tag is empty", ErrInvalidTag)
	case len(name) > maxTagLen:
		return fmt.Errorf("%w: the tag is %d bytes, more than %d", ErrInvalidTag, len(name), maxTagLen)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is a path segment, not a tag", ErrInvalidTag, name)
	}
	// Positions count bytes from 1, as the idempotency key's errors do;
	// the offender is the whole character, so "✓" is reported as '✓',
	// not as the first byte of its UTF-8 encoding.
	for i, c := range name {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_' || c == '.' || c == ':' || c == '-':
		case c == utf8.RuneError:
			return fmt.Errorf("%w: byte %d of %q is 0x%02x, not UTF-8",
				ErrInvalidTag, i+1, name, name[i])
		default:
			return fmt.Errorf("%w: byte %d of %q is %s",
				ErrInvalidTag, i+1, name, strconv.QuoteRune(c))
		}
	}
	return nil
}

// ValidTag reports whether CheckTag accepts name, for callers that need
// no reason, such as filters.
func ValidTag(name string) bool { return CheckTag(name) == nil }
