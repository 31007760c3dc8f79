package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names.
const (
	// KeyHeader carries the key of a request. It is in canonical form
	// (textproto.CanonicalMIMEHeaderKey), so it indexes an http.Header
	// directly: the server reads every value that way, to refuse two.
	KeyHeader = "Idempotency-Key"
	// TTLHeader sets, in seconds, how long a new key is kept. The draft
	// leaves expiry to the server's published policy; this is idgen's
	// way to let a caller ask for less or more, up to the server's max.
	TTLHeader = "Idempotency-TTL"
	// ReplayedHeader is "true" on an answer that repeats a recorded one.
	ReplayedHeader = "Idempotent-Replayed"
)

// MaxKeyLength is the longest key accepted.
const MaxKeyLength = 255

// Errors of the protocol. Each maps to one HTTP status and stable code.
var (
	// ErrInvalidKey: the key is empty, too long or not printable ASCII.
	ErrInvalidKey = errors.New("idempotency: invalid key")
	// ErrInvalidTTL: the TTL header is not a whole number of seconds
	// from 1 to the server's max.
	ErrInvalidTTL = errors.New("idempotency: invalid TTL")
	// ErrKeyReused: the key was first used for another request.
	ErrKeyReused = errors.New("idempotency: key reused for another request")
	// ErrInFlight: the first request with this key is still running.
	// The error is an *InFlightError, which says how long to wait.
	ErrInFlight = errors.New("idempotency: the first request with this key is still in flight")
	// ErrKeyLimit: the caller holds the most live keys allowed.
	ErrKeyLimit = errors.New("idempotency: too many live keys for this caller")
	// ErrStore: the key store failed; the request allocated nothing.
	ErrStore = errors.New("idempotency: key store failed")
)

// InFlightError is ErrInFlight with the time until the first request's
// lock expires, after which a retry may take over.
type InFlightError struct{ Wait time.Duration }

func (e *InFlightError) Error() string {
	return fmt.Sprintf("%v; retry in %v", ErrInFlight, e.Wait)
}

// Is makes errors.Is(err, ErrInFlight) match.
func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// RetryAfter is the wait a Retry-After header should announce: at least
// a second, since the header counts whole seconds.
func (e *InFlightError) RetryAfter() time.Duration {
	return max(e.Wait.Round(time.Second), time.Second)
}

// ParseKey checks a header value and returns the key. It accepts the
// draft's form, a Structured Fields string ("…", with \" and \\
// escapes), and the bare form most APIs use; the key is what lies
// between the quotes. A key is 1 to MaxKeyLength printable ASCII
// characters (0x20 to 0x7e); a bare key holds no comma (that is a
// list) and no quote (that is an unbalanced string).
func ParseKey(v string) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		var b strings.Builder
		for i := 1; i < len(v)-1; i++ {
			c := v[i]
			if c == '"' {
				return "", fmt.Errorf("%w: unescaped quote inside the quoted key", ErrInvalidKey)
			}
			if c == '\\' {
				if i++; i == len(v)-1 || (v[i] != '"' && v[i] != '\\') {
					return "", fmt.Errorf("%w: a backslash in a quoted key must escape \" or \\", ErrInvalidKey)
				}
				c = v[i]
			}
			b.WriteByte(c)
		}
		v = b.String()
	} else if i := strings.IndexAny(v, `",`); i >= 0 {
		// A comma is a list of keys (two headers folded into one, or a
		// caller's mistake) and a stray quote an unbalanced string:
		// taking either as one key would make a retry that sends it
		// differently a new request.
		return "", fmt.Errorf("%w: a bare key must not hold %q (byte %d): send one key, quoted as a Structured Fields string (\"…\") if it holds a comma or quote", ErrInvalidKey, v[i], i+1)
	}
	if v == "" || len(v) > MaxKeyLength {
		return "", fmt.Errorf("%w: a key must be 1 to %d characters, got %d", ErrInvalidKey, MaxKeyLength, len(v))
	}
	for i := range len(v) {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", fmt.Errorf("%w: a key must be printable ASCII; byte %d is 0x%02x", ErrInvalidKey, i+1, v[i])
		}
	}
	return v, nil
}

// ParseTTL reads the TTL header: "" gives def, otherwise a whole number
// of seconds from 1 to max.
func ParseTTL(v string, def, maxTTL time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > int64(maxTTL/time.Second) {
		return 0, fmt.Errorf("%w: %s must be whole seconds from 1 to %d", ErrInvalidTTL, TTLHeader, int64(maxTTL/time.Second))
	}
	return time.Duration(n) * time.Second, nil
}

// Fingerprint identifies what a request asks for, so that a key reused
// for another request is told apart from a retry. parts are the
// request's meaningful fields (tag, mode, count, format …) in a fixed
// order; each is length-prefixed, so no two lists share a fingerprint.
func Fingerprint(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		_, _ = h.Write(strconv.AppendInt(nil, int64(len(p)), 10))
		_, _ = h.Write([]byte{':'})
		_, _ = h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}
