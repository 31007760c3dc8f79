package errcode

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/readable"
	"github.com/idgen/idgen/segment"
)

func TestTable(t *testing.T) {
	for _, r := range rules {
		c, ok := codes[r.code]
		if !ok {
			t.Errorf("rule for %v names code %q, which the table lacks", r.err, r.code)
			continue
		}
		if got, _ := ForError(r.err); got.Name != c.Name {
			// An earlier rule catches this sentinel: this one is dead.
			t.Errorf("ForError(%v) = %q, want %q", r.err, got.Name, c.Name)
		}
	}
	for name, c := range codes {
		if c.Name != name || http.StatusText(c.Status) == "" || c.Status < 400 {
			t.Errorf("code %q: name %q, status %d", name, c.Name, c.Status)
		}
		if c.Retry && c.Status != http.StatusServiceUnavailable && c.Status != http.StatusConflict && c.Status != http.StatusTooManyRequests {
			t.Errorf("code %q: Retry-After on a %d, which no client waits on", name, c.Status)
		}
		if c.Status >= 500 && c.Message == "" && name != "unavailable" {
			t.Errorf("code %q: a 5xx without a fixed message gets the generic one; give it one that says what to do", name)
		}
	}
}

func TestForError_Unknown(t *testing.T) {
	if c, ok := ForError(http.ErrAbortHandler); ok {
		t.Errorf("ForError of an error no rule names = %q, want none", c.Name)
	}
}

func TestMessage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{idgen.CheckTag("bad tag"), `invalid tag: use 1 to 64 characters of A-Z a-z 0-9 _ . : -: byte 4 of "bad tag" is ' '`},
		{fmt.Errorf("%w: check characters do not match", readable.ErrInvalid), "invalid ID: check characters do not match"},
		{fmt.Errorf("%w: %w", segment.ErrInvalidStep, idgen.ErrInvalidCount), "invalid step or start: invalid count: ask for at least one ID"},
		{fmt.Errorf("%w: too long", idempotency.ErrInvalidKey), "invalid key: too long"},
		{fmt.Errorf("segment: create: %w", idgen.CheckTag("")), "create: invalid tag: use 1 to 64 characters of A-Z a-z 0-9 _ . : -: the tag is empty"},
		{fmt.Errorf("segment: %w", idgen.ErrInvalidCount), "invalid count: ask for at least one ID"},
		// A package name inside a quoted tag is the caller's text.
		{idgen.CheckTag("segment:x y"), `byte 10 of "segment:x y"`},
	} {
		if got := Message(tc.err); !strings.Contains(got, tc.want) || pkgPrefix.MatchString(got) {
			t.Errorf("Message(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
