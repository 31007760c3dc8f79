package errcode

import (
	"net/http"
	"testing"
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
