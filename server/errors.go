package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

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
	errInternal         = &apiError{http.StatusInternalServerError, "internal", "internal error; the server log has the details"}
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
}

// writeError answers err in the one JSON error shape, or as plain text
// on the routes of other services' APIs (see compat.go). Unknown errors
// are logged and answered without detail, so no internals leak.
func (s *Server) writeError(c *gin.Context, err error) {
	ae := s.answer(c, err)
	if c.GetBool(plainErrors) {
		c.Abort()
		c.Data(ae.status, "text/plain; charset=utf-8", []byte(ae.code+": "+ae.message+"\n"))
		return
	}
	c.AbortWithStatusJSON(ae.status, gin.H{"error": gin.H{"code": ae.code, "message": ae.message}})
}

// answer maps err to its status, code and message, setting Retry-After
// and counting clock errors on the way.
func (s *Server) answer(c *gin.Context, err error) *apiError {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = nil
		for _, r := range rules {
			if errors.Is(err, r.err) {
				ae = &apiError{r.status, r.code, err.Error()}
				if r.retryAfter {
					c.Header("Retry-After", "1")
				}
				break
			}
		}
	}
	if ae != nil && ae.code == "clock_moved_backwards" && s.metrics != nil {
		s.metrics.clockBack.Inc()
	}
	if ae == nil {
		s.log.Error("unexpected error", "path", c.Request.URL.Path, "err", err)
		ae = errInternal
	}
	return ae
}
