package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/readable"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/snowflake"
)

// apiError is an error with its HTTP answer already decided.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// Errors the HTTP layer itself detects.
var (
	errInvalidCount = &apiError{http.StatusBadRequest, "invalid_count",
		"count must be a single whole number from 1 to the server's max batch"}
	errNotFound         = &apiError{http.StatusNotFound, "not_found", "no such route; see the API document"}
	errMethodNotAllowed = &apiError{http.StatusMethodNotAllowed, "method_not_allowed", "this route does not accept that method"}
	errModeDisabled     = &apiError{http.StatusNotFound, "mode_disabled", "this server does not run that ID strategy; start it with the mode enabled"}
	errInternal         = &apiError{http.StatusInternalServerError, "internal", "internal error; the server log has the details under this request ID"}
	errNotReady         = &apiError{http.StatusServiceUnavailable, "not_ready", "not ready: the store or the generator cannot issue IDs; the server log has the cause under this request ID"}
)

// rule maps a sentinel error to its answer. The first match wins.
type rule struct {
	err        error
	status     int
	code       string
	retryAfter bool
}

var rules = []rule{
	{segment.ErrInvalidTag, http.StatusBadRequest, "invalid_tag", false},
	{segment.ErrInvalidCount, http.StatusBadRequest, "invalid_count", false},
	{segment.ErrInvalidStep, http.StatusBadRequest, "invalid_step", false},
	{segment.ErrTagNotFound, http.StatusNotFound, "tag_not_found", false},
	{segment.ErrTagExists, http.StatusConflict, "tag_exists", false},
	{segment.ErrTagLimit, http.StatusConflict, "tag_limit_reached", false},
	{snowflake.ErrInvalidID, http.StatusBadRequest, "invalid_id", false},
	{readable.ErrInvalid, http.StatusBadRequest, "invalid_id", false},
	{segment.ErrExhausted, http.StatusServiceUnavailable, "tag_exhausted", false},
	{segment.ErrUnavailable, http.StatusServiceUnavailable, "unavailable", true},
	{snowflake.ErrClockMovedBackwards, http.StatusServiceUnavailable, "clock_moved_backwards", true},
	{snowflake.ErrTimeExhausted, http.StatusServiceUnavailable, "time_exhausted", false},
	{snowflake.ErrNoWorkerLease, http.StatusServiceUnavailable, "no_worker_lease", true},
	{snowflake.ErrLeaseLost, http.StatusServiceUnavailable, "no_worker_lease", true},
	{segment.ErrClosed, http.StatusServiceUnavailable, "unavailable", true},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "unavailable", true},
	{context.Canceled, http.StatusServiceUnavailable, "unavailable", true},
	{idempotency.ErrInvalidKey, http.StatusBadRequest, "invalid_idempotency_key", false},
	{idempotency.ErrInvalidTTL, http.StatusBadRequest, "invalid_idempotency_ttl", false},
	{idempotency.ErrKeyReused, http.StatusUnprocessableEntity, "idempotency_key_reused", false},
	{idempotency.ErrInFlight, http.StatusConflict, "idempotency_key_in_flight", true},
	{idempotency.ErrKeyLimit, http.StatusTooManyRequests, "idempotency_key_limit_reached", false},
	{idempotency.ErrStore, http.StatusServiceUnavailable, "unavailable", true},
}

// messages replace an error's own text in the answer. Every 5xx gets one
// (a code without an entry gets the generic one), so that no store,
// driver or lease detail reaches a caller: those go to the log under the
// request ID.
var messages = map[string]string{
	"tag_limit_reached":     "this server already serves its maximum number of tags; restart it with a higher --max-tags (IDGEN_MAX_TAGS, 0 for no limit), or reuse an existing tag",
	"unavailable":           "the ID store did not answer in time; retry after the Retry-After delay; if it persists, the server log has the cause under this request ID",
	"clock_moved_backwards": "this server's clock moved backwards; retry after the Retry-After delay or use another instance",
	"no_worker_lease":       "this server holds no snowflake worker lease; retry after the Retry-After delay or use another instance; the server log has the cause under this request ID",
	"time_exhausted":        "the snowflake time range of this layout is used up; the operator must move to a new epoch",
	"tag_exhausted":         "this tag has reached the largest 64-bit ID; use a new tag",

	"idempotency_key_reused":        "this Idempotency-Key was first used for another request (another tag, mode, count or format); send a new key for a new request",
	"idempotency_key_in_flight":     "the first request with this Idempotency-Key is still running; retry after the Retry-After delay to get its answer",
	"idempotency_key_limit_reached": "this caller holds the most live idempotency keys the server allows (idgen serve --idempotency-max-keys); send a key only where a retry must get the same IDs, or a shorter Idempotency-TTL",
}

const serverErrorMessage = "the server could not answer; retry later; the server log has the cause under this request ID"

// writeError answers err in the one JSON error shape, or as plain text
// on the routes of other services' APIs (see compat.go). Unknown errors
// are logged and answered without detail, so no internals leak.
func (s *Server) writeError(c *gin.Context, err error) {
	s.fail(c, s.answer(c, err), err)
}

// answer maps err to its status, code and message, setting Retry-After
// on the way.
func (s *Server) answer(c *gin.Context, err error) *apiError {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = errInternal
		for _, r := range rules {
			if errors.Is(err, r.err) {
				msg, fixed := messages[r.code]
				switch {
				case fixed:
				case r.status >= 500:
					msg = serverErrorMessage
				default:
					msg = err.Error()
				}
				ae = &apiError{r.status, r.code, msg}
				if r.retryAfter {
					c.Header("Retry-After", retryAfter(err))
				}
				break
			}
		}
	}
	return ae
}

// retryAfter is the Retry-After of err: its own wait when it knows one
// (a key in flight knows when its lock expires), else 1 second.
func retryAfter(err error) string {
	var w interface{ RetryAfter() time.Duration }
	if errors.As(err, &w) {
		return strconv.Itoa(int(w.RetryAfter().Seconds()))
	}
	return "1"
}

// fail answers ae with the request ID. For a 5xx it logs cause under that
// ID; ae's message never carries cause's text.
func (s *Server) fail(c *gin.Context, ae *apiError, cause error) {
	rid := s.record(c, ae, cause)
	if c.GetBool(plainErrors) {
		// Other services' APIs (compat.go): one line of text; the request
		// ID is in the X-Request-ID header.
		c.Abort()
		c.Data(ae.status, "text/plain; charset=utf-8", []byte(ae.code+": "+ae.message+"\n"))
		return
	}
	c.AbortWithStatusJSON(ae.status, gin.H{"error": gin.H{"code": ae.code, "message": ae.message, "request_id": rid}})
}

// record logs a 5xx's cause under the request ID, which it returns, and
// counts the error.
func (s *Server) record(c *gin.Context, ae *apiError, cause error) string {
	rid := c.Writer.Header().Get(requestIDHeader)
	if ae.status >= 500 {
		level := slog.LevelWarn
		if ae == errInternal {
			level = slog.LevelError
		}
		s.log.LogAttrs(c.Request.Context(), level, "request failed", slog.String("request_id", rid),
			slog.String("path", c.Request.URL.Path), slog.Int("status", ae.status), slog.String("code", ae.code),
			slog.Any("err", cause))
		if ae.code == "clock_moved_backwards" && s.metrics != nil {
			s.metrics.clockBack.Inc()
		}
	} else if s.metrics != nil {
		s.metrics.clientErrs.WithLabelValues(ae.code).Inc()
	}
	return rid
}
