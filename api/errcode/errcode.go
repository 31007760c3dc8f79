// Package errcode is the one table of idgen's error codes for errors that
// have a sentinel: which sentinel each stable code stands for, its HTTP
// status, whether a caller should retry, and the fixed message it is
// answered with. The server answers from it (server.classify), and the
// client maps a code back to the sentinels errors.Is matches
// (client.Error.Is), so the two cannot drift apart.
//
// Codes the HTTP layer detects itself, with a message about the request
// (invalid_body, not_found, …), are answered where they are detected.
package errcode

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/lock"
	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/readable"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
)

// Code is one stable error code.
type Code struct {
	Name   string
	Status int
	// Retry: the answer carries Retry-After (RetryInfo over gRPC).
	Retry bool
	// Message replaces the error's own text in the answer; "" keeps the
	// text of a 4xx and gives a 5xx the generic message, so that no
	// store, driver or lease detail reaches a caller.
	Message string
	// Match are the errors a client's error of this code matches, beside
	// what its status means (client.Error.Is).
	Match []error
	// Final: the client's error matches Match alone, not what its
	// status would mean; a 503 that no wait cures is no
	// segment.ErrUnavailable, and a 409 of a key in flight is no
	// ErrBadRequest.
	Final bool
	// BadRequest: the client's error also matches its own
	// ErrBadRequest, which this package cannot name (client imports it).
	BadRequest bool
}

// codes, by name. Never written after init.
var codes = func() map[string]Code {
	m := map[string]Code{}
	for _, c := range []Code{
		{Name: "invalid_tag", Status: http.StatusBadRequest, Match: []error{idgen.ErrInvalidTag}},
		{Name: "invalid_count", Status: http.StatusBadRequest, Match: []error{idgen.ErrInvalidCount}},
		{Name: "invalid_size", Status: http.StatusBadRequest, Match: []error{idgen.ErrInvalidCount}},
		{Name: "invalid_step", Status: http.StatusBadRequest},
		{Name: "invalid_description", Status: http.StatusBadRequest},
		{Name: "tag_not_found", Status: http.StatusNotFound, Match: []error{segment.ErrTagNotFound}},
		{Name: "tag_exists", Status: http.StatusConflict},
		{Name: "tag_limit_reached", Status: http.StatusConflict,
			// Final until the server's operator raises the cap.
			Match:   []error{segment.ErrTagLimit, segment.ErrRefused},
			Message: "this server already serves its maximum number of tags; restart it with a higher --max-tags (IDGEN_MAX_TAGS, 0 for no limit), or reuse an existing tag"},
		{Name: "invalid_id", Status: http.StatusBadRequest},
		// An opaque tag's counters are what it hides: final, whatever
		// the retries.
		{Name: "opaque_tag_range", Status: http.StatusConflict, Match: []error{opaque.ErrRangeRefused, segment.ErrRefused}},
		{Name: "tag_not_opaque", Status: http.StatusConflict},
		{Name: "opaque_refused", Status: http.StatusServiceUnavailable,
			Message: "this tag is opaque and this instance serves no opaque tags (it reserves from Leaf's leaf_alloc table); retry on an instance on idgen's own id_sequence table"},
		{Name: "opaque_key_missing", Status: http.StatusServiceUnavailable,
			Message: "this tag is opaque and this instance holds no opaque key; retry on another instance; the operator must start every instance with the fleet's key (--opaque-key-file)"},
		{Name: "opaque_key_mismatch", Status: http.StatusServiceUnavailable,
			Message: "this tag is opaque under another key than this instance's; retry on another instance; the operator must start every instance with the same key (--opaque-key-file)"},
		{Name: "opaque_key_conflict", Status: http.StatusServiceUnavailable, Match: []error{segment.ErrOpaqueConflict},
			Message: "this tag is opaque, and the store's two records of its key (its id_sequence row and tag_opaque) name different keys, as after a partial restore; no instance serves it until the operator corrects the wrong one (docs/segment.md, Opaque tags)"},
		{Name: "tag_exhausted", Status: http.StatusServiceUnavailable, Match: []error{segment.ErrExhausted}, Final: true,
			Message: "this tag has reached the largest 64-bit ID; use a new tag"},
		{Name: "unavailable", Status: http.StatusServiceUnavailable, Retry: true,
			// One code for both stores; the message names which, as lock
			// grants may live apart from IDs (serve --lock-store).
			Message: "the store did not answer in time (the ID store; for lock calls, the lock store); retry after the Retry-After delay; if it persists, the server log has the cause under this request ID"},
		{Name: "worker_floor_ahead", Status: http.StatusServiceUnavailable, Retry: true,
			Message: "this server's snowflake worker ID may not issue yet: it is held past now for an earlier holder or by a store fence after a failover or restore; retry after the Retry-After delay or use another instance"},
		{Name: "clock_moved_backwards", Status: http.StatusServiceUnavailable, Retry: true,
			Message: "this server's clock moved backwards; retry after the Retry-After delay or use another instance"},
		{Name: "time_exhausted", Status: http.StatusServiceUnavailable,
			Message: "the snowflake time range of this layout is used up; the operator must move to a new epoch"},
		{Name: "no_worker_lease", Status: http.StatusServiceUnavailable, Retry: true,
			Message: "this server holds no snowflake worker lease; retry after the Retry-After delay or use another instance; the server log has the cause under this request ID"},
		{Name: "invalid_idempotency_key", Status: http.StatusBadRequest, Match: []error{idempotency.ErrInvalidKey}},
		{Name: "invalid_idempotency_ttl", Status: http.StatusBadRequest},
		{Name: "idempotency_key_reused", Status: http.StatusUnprocessableEntity, Final: true, BadRequest: true,
			// The fingerprint is a hash, so the message cannot say which
			// part differs; the API is the part a newcomer misses.
			Match:   []error{idempotency.ErrKeyReused},
			Message: "this Idempotency-Key was first used for another request: another tag, mode, count or format, or the other API (a key first sent over HTTP is refused over gRPC, and the reverse); send a new key for a new request"},
		{Name: "idempotency_key_in_flight", Status: http.StatusConflict, Retry: true, Final: true,
			Match:   []error{idempotency.ErrInFlight},
			Message: "the first request with this Idempotency-Key is still running; retry after the Retry-After delay to get its answer"},
		{Name: "idempotency_key_limit_reached", Status: http.StatusTooManyRequests, Retry: true, Final: true,
			Match:   []error{idempotency.ErrKeyLimit},
			Message: "this caller holds the most live idempotency keys the server allows (idgen serve --idempotency-max-keys); retry after the Retry-After delay, when expired keys have made room; send a key only where a retry must get the same IDs, or a shorter Idempotency-TTL; callers without an API token share one anonymous cap"},
		// Locks (server/locks.go). The 409s are final: the lock's state,
		// not the server's, refused the call, and asking again at once
		// changes nothing. Their messages are fixed, since a backend's
		// text may name another owner, which only the admin scope sees.
		{Name: "invalid_lock_name", Status: http.StatusBadRequest, Match: []error{lock.ErrInvalidName}, BadRequest: true},
		{Name: "invalid_lock_owner", Status: http.StatusBadRequest, Match: []error{lock.ErrInvalidOwner}, BadRequest: true},
		{Name: "invalid_lock_ttl", Status: http.StatusBadRequest, Match: []error{lock.ErrInvalidTTL}, BadRequest: true},
		{Name: "invalid_lock_wait", Status: http.StatusBadRequest, BadRequest: true},
		{Name: "lock_held", Status: http.StatusConflict, Final: true, Match: []error{lock.ErrHeld},
			Message: "another owner holds this lock; retry later, or ask with a wait"},
		{Name: "lock_lost", Status: http.StatusConflict, Final: true, Match: []error{lock.ErrLost},
			Message: "this grant is no longer the lock's: it lapsed or another owner took the lock; stop the work it protected and acquire again"},
		{Name: "lock_not_held", Status: http.StatusConflict, Final: true, Match: []error{lock.ErrNotHeld},
			Message: "this owner and token are not the lock's grant (another owner's, or an older token); the lock was left as it was"},
		{Name: "lock_limit_reached", Status: http.StatusConflict, Final: true,
			Message: "this server already tracks its maximum number of lock names; restart it with a higher --max-locks, or reuse names"},
	} {
		m[c.Name] = c
	}
	return m
}()

// detected are the codes the server answers where it detects the
// mistake, with a message about the request, and so without a row in
// codes. With codes they are every code an answer carries: the set the
// API document, docs/operations.md and docs/grpc.md list
// (codeset_test.go).
var detected = []string{
	"invalid_body", "invalid_format", "invalid_release", "not_found", "method_not_allowed",
	"mode_disabled", "internal", "not_ready", "unauthorized", "forbidden", "admin_disabled",
	"admin_unavailable", "client_certificate_required", "opaque_fixed", "idempotency_disabled",
	"idempotency_not_supported", "range_not_released", "release_disabled", "ui_disabled",
	"locks_disabled", "invalid_lock_token",
	// gRPC only: an enum value the server does not know.
	"invalid_mode",
}

// Names returns every code an answer may carry, sorted.
func Names() []string {
	names := slices.Clone(detected)
	for name := range codes {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// rules map sentinels to codes, in order: the first match wins, so a
// specific error that also wraps a general one (ErrHeld wraps
// segment.ErrUnavailable) is listed before it.
var rules = []struct {
	err  error
	code string
}{
	{segment.ErrInvalidTag, "invalid_tag"},
	{segment.ErrInvalidCount, "invalid_count"},
	{segment.ErrInvalidStep, "invalid_step"},
	{segment.ErrInvalidDescription, "invalid_description"},
	{segment.ErrTagNotFound, "tag_not_found"},
	{segment.ErrTagExists, "tag_exists"},
	{segment.ErrTagLimit, "tag_limit_reached"},
	{snowflake.ErrInvalidID, "invalid_id"},
	{readable.ErrInvalid, "invalid_id"},
	{opaque.ErrRangeRefused, "opaque_tag_range"},
	{opaque.ErrNotOpaque, "tag_not_opaque"},
	{opaque.ErrRange, "invalid_id"},
	{opaque.ErrNoKey, "opaque_key_missing"},
	{opaque.ErrKeyMismatch, "opaque_key_mismatch"},
	{opaque.ErrRefused, "opaque_refused"},
	{segment.ErrOpaqueConflict, "opaque_key_conflict"},
	{segment.ErrExhausted, "tag_exhausted"},
	{segment.ErrUnavailable, "unavailable"},
	{snowflake.ErrFloorAhead, "worker_floor_ahead"},
	{snowflake.ErrClockMovedBackwards, "clock_moved_backwards"},
	{snowflake.ErrTimeExhausted, "time_exhausted"},
	{snowflake.ErrNoWorkerLease, "no_worker_lease"},
	{snowflake.ErrLeaseLost, "no_worker_lease"},
	{segment.ErrClosed, "unavailable"},
	{context.DeadlineExceeded, "unavailable"},
	{context.Canceled, "unavailable"},
	{idempotency.ErrInvalidKey, "invalid_idempotency_key"},
	{idempotency.ErrInvalidTTL, "invalid_idempotency_ttl"},
	{idempotency.ErrKeyReused, "idempotency_key_reused"},
	{idempotency.ErrInFlight, "idempotency_key_in_flight"},
	{idempotency.ErrKeyLimit, "idempotency_key_limit_reached"},
	{idempotency.ErrStore, "unavailable"},
	{lock.ErrInvalidName, "invalid_lock_name"},
	{lock.ErrInvalidOwner, "invalid_lock_owner"},
	{lock.ErrInvalidTTL, "invalid_lock_ttl"},
	{lock.ErrHeld, "lock_held"},
	{lock.ErrLost, "lock_lost"},
	{lock.ErrNotHeld, "lock_not_held"},
}

// pkgPrefix is a Go package's name at the start of an error's text or of
// one of its wrapped parts ("readable: invalid ID: …").
var pkgPrefix = regexp.MustCompile(`(^|: )(?:idgen|segment|readable|snowflake|opaque|idempotency|lock): `)

// Message is the text of a 4xx err as a caller reads it: the error's own
// text without the Go package names its parts start with, which mean
// something to a Go programmer reading a log and nothing to an HTTP or
// gRPC caller.
func Message(err error) string {
	msg := err.Error()
	for {
		// Again until none is left: "segment: idgen: " loses one per pass.
		plain := pkgPrefix.ReplaceAllString(msg, "$1")
		if plain == msg {
			return msg
		}
		msg = plain
	}
}

// ForError returns the code of err: the first sentinel err matches.
func ForError(err error) (Code, bool) {
	for _, r := range rules {
		if errors.Is(err, r.err) {
			return codes[r.code], true
		}
	}
	return Code{}, false
}

// Lookup returns the code named name.
func Lookup(name string) (Code, bool) {
	c, ok := codes[name]
	return c, ok
}
