package server

import (
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/segment"
)

// RangeReserver hands out whole ranges, for clients that cache them;
// *segment.Allocator implements it.
type RangeReserver interface {
	ReserveRange(ctx context.Context, tag string, n int64) (segment.Range, error)
}

// reserveRange answers POST /segment/{tag}/range?size=N with a contiguous
// range reserved straight from the store. The range holds at least size
// IDs, more when the tag's step is larger, but a size above MaxRange is
// clamped to it rather than refused: a client whose step grew past the
// server's cap then gets a smaller range, and learns the cap from it,
// instead of a final 400 that stops it (see the client package).
func (s *Server) reserveRange(c *gin.Context) {
	if s.cfg.Ranges == nil {
		s.writeError(c, errModeDisabled)
		return
	}
	vals := c.Request.URL.Query()["size"]
	size, err := strconv.ParseInt(firstOrEmpty(vals), 10, 64)
	if len(vals) != 1 || err != nil || size < 1 {
		s.writeError(c, s.errInvalidSize())
		return
	}
	size = min(size, s.cfg.MaxRange)
	tag := c.Param("tag")
	r, err := s.cfg.Ranges.ReserveRange(c.Request.Context(), tag, size)
	if err != nil {
		s.writeError(c, err)
		return
	}
	s.issued(tag, "range", int(r.Size()))
	c.PureJSON(http.StatusOK, gin.H{"tag": tag, "start": strconv.FormatInt(r.Start, 10), "end": strconv.FormatInt(r.End, 10)})
}

func firstOrEmpty(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// errInvalidSize answers a range size that is not a whole number of at
// least 1; a larger one than MaxRange is clamped, not refused.
func (s *Server) errInvalidSize() *apiError {
	return &apiError{http.StatusBadRequest, "invalid_size",
		"size must be a single whole number of at least 1 (ranges above " + strconv.FormatInt(s.cfg.MaxRange, 10) + " are clamped to it)"}
}
