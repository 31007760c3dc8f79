package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/api/errcode"
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
	errNotFound         = &apiError{http.StatusNotFound, "not_found", "no such route; see the API document, " + APIDocument}
	errMethodNotAllowed = &apiError{http.StatusMethodNotAllowed, "method_not_allowed", "this route does not accept that method"}
	errModeDisabled     = &apiError{http.StatusNotFound, "mode_disabled", "this server does not run that ID strategy; start it with the mode enabled"}
	errInternal         = &apiError{http.StatusInternalServerError, "internal", "internal error; the server log has the details under this request ID"}
	errNotReady         = &apiError{http.StatusServiceUnavailable, "not_ready", "not ready: the store or the generator cannot issue IDs; the server log has the cause under this request ID"}
)

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
	ae, retry := classify(err)
	if retry {
		c.Header("Retry-After", retryAfterSeconds(retryDelay(err)))
	}
	return ae
}

// defaultRetryDelay is the wait announced, as Retry-After over HTTP and
// RetryInfo over gRPC, for an error whose rule says to retry but that
// does not know its own delay.
const defaultRetryDelay = time.Second

// retryDelay is how long a caller should wait before retrying err: the
// error's own RetryAfter when it knows it (a key in flight knows when its
// lock expires, a clock behind or a worker floor ahead by how much, a
// segment store in backoff when the next load starts), else
// defaultRetryDelay. Errors say so by a method rather than by a sentinel,
// as pgconn's SafeToRetry does, so that a wrapped error keeps it.
func retryDelay(err error) time.Duration {
	var w interface{ RetryAfter() time.Duration }
	if errors.As(err, &w) {
		if d := w.RetryAfter(); d > 0 {
			return d
		}
	}
	return defaultRetryDelay
}

// retryAfterSeconds is d as a Retry-After value: whole seconds, rounded
// up, so that a caller that waits as told does not come back early.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((max(d, time.Second)+time.Second-1)/time.Second), 10)
}

// classify is the one mapping from errors to answers (from the table of
// api/errcode, which the client reads too), shared by HTTP and gRPC
// (errtable.go gives each answer's gRPC code): the status, stable code
// and message of err, and whether the caller should retry (after
// retryDelay).
func classify(err error) (ae *apiError, retry bool) {
	if errors.As(err, &ae) {
		return ae, false
	}
	c, ok := errcode.ForError(err)
	if !ok {
		return errInternal, false
	}
	msg := c.Message
	if msg == "" {
		msg = serverErrorMessage
		if c.Status < 500 {
			msg = errcode.Message(err)
		}
	}
	return &apiError{c.Status, c.Name, msg}, c.Retry
}

// monitoredError is how /admin/segments shows a tag's or the worker's
// last error: its code and a fixed message, never the error's text,
// which may hold a driver's detail; the cause goes to the log under the
// request ID, as for a 5xx answer.
func (s *Server) monitoredError(c *gin.Context, what string, err error) string {
	ae, _ := classify(err)
	rid := c.Writer.Header().Get(requestIDHeader)
	s.cfg.Logger.LogAttrs(c.Request.Context(), slog.LevelWarn, "monitored error", slog.String("request_id", rid),
		slog.String("of", what), slog.String("code", ae.code), slog.Any("err", err))
	return ae.code + ": " + what + " failed last time; the server log has the cause under request ID " + rid
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
	body := gin.H{"code": ae.code, "message": ae.message, "request_id": rid}
	var held *lockHeldError
	if errors.As(cause, &held) && held.admin {
		body["holder"] = gin.H{"owner": held.holder.Owner, "expires_at": timeOut(held.holder.Expires)}
	}
	c.AbortWithStatusPureJSON(ae.status, gin.H{"error": body})
}

// record logs a 5xx's cause under the request ID, which it returns, and
// counts the error.
func (s *Server) record(c *gin.Context, ae *apiError, cause error) string {
	rid := c.Writer.Header().Get(requestIDHeader)
	s.recordError(c.Request.Context(), rid, c.Request.URL.Path, ae, cause)
	return rid
}

// recordError logs a 5xx's cause under the request ID rid, and counts
// the error: for HTTP and gRPC alike.
func (s *Server) recordError(ctx context.Context, rid, path string, ae *apiError, cause error) {
	if ae.status >= 500 {
		level := slog.LevelWarn
		if ae == errInternal {
			level = slog.LevelError
		}
		s.cfg.Logger.LogAttrs(ctx, level, "request failed", slog.String("request_id", rid),
			slog.String("path", path), slog.Int("status", ae.status), slog.String("code", ae.code),
			slog.Any("err", cause))
		if ae.code == "clock_moved_backwards" && s.cfg.Metrics != nil {
			s.cfg.Metrics.clockBack.Inc()
		}
	} else if s.cfg.Metrics != nil {
		s.cfg.Metrics.clientErrs.WithLabelValues(ae.code).Inc()
	}
}
