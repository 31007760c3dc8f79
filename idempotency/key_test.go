package idempotency_test

import (
	"errors"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/idempotency"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"abc", "abc", true},
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{`"8e03978e"`, "8e03978e", true},
		{`"a\"b\\c"`, `a"b\c`, true},
		{"with space ~", "with space ~", true},
		{strings.Repeat("k", 255), strings.Repeat("k", 255), true},
		{"", "", false},
		{`""`, "", false},
		{strings.Repeat("k", 256), "", false},
		{"tab\there", "", false},
		{"caf\xc3\xa9", "", false},
		{"del\x7f", "", false},
		{`"a"b"`, "", false},
		{`"a\x"`, "", false},
		// A list, and unbalanced quotes.
		{"a, b", "", false},
		{`"a", "b"`, "", false},
		{`"abc`, "", false},
		{`abc"`, "", false},
		{`a"b`, "", false},
		// Inside quotes, a comma is part of the key.
		{`"a,b"`, "a,b", true},
	} {
		got, err := idempotency.ParseKey(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseKey(%q) = %q, %v", tc.in, got, err)
		}
		if err != nil && !errors.Is(err, idempotency.ErrInvalidKey) {
			t.Errorf("ParseKey(%q): %v is not ErrInvalidKey", tc.in, err)
		}
	}
}

func TestParseTTL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", time.Hour, true},
		{"1", time.Second, true},
		{"7200", 2 * time.Hour, true},
		{"7201", 0, false},
		{"0", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"1h", 0, false},
	} {
		got, err := idempotency.ParseTTL(tc.in, time.Hour, 2*time.Hour)
		if tc.ok != (err == nil) || got != tc.want || (err != nil && !errors.Is(err, idempotency.ErrInvalidTTL)) {
			t.Errorf("ParseTTL(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	a := idempotency.Fingerprint("order", "segment", "1")
	if a != idempotency.Fingerprint("order", "segment", "1") {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{
		idempotency.Fingerprint("order", "segment", "2"),
		idempotency.Fingerprint("orders", "egment", "1"),
		idempotency.Fingerprint("order", "segment1"),
	} {
		if other == a {
			t.Fatal("two requests share a fingerprint")
		}
	}
}

// The server indexes http.Header by KeyHeader directly (TTLHeader goes
// through Header.Get, which canonicalises).
func TestKeyHeaderIsCanonical(t *testing.T) {
	t.Parallel()
	if c := textproto.CanonicalMIMEHeaderKey(idempotency.KeyHeader); c != idempotency.KeyHeader {
		t.Errorf("%q is not canonical (%q): an http.Header lookup by it finds nothing", idempotency.KeyHeader, c)
	}
}
