package server

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/readable"
)

// Output formats of the ID endpoints.
const (
	formatNumeric  = "numeric"
	formatPrefixed = "prefixed"
)

var errInvalidSnowflake = &apiError{http.StatusBadRequest, "invalid_id", "a snowflake ID is a non-negative decimal 64-bit integer"}

var errInvalidFormat = &apiError{http.StatusBadRequest, "invalid_format", "format must be numeric (the default) or prefixed"}

func parseFormat(q url.Values) (string, error) {
	vals, ok := q["format"]
	if !ok {
		return formatNumeric, nil
	}
	if len(vals) != 1 || (vals[0] != formatNumeric && vals[0] != formatPrefixed) {
		return "", errInvalidFormat
	}
	return vals[0], nil
}

// appendID writes id in the requested format: decimal, or the readable
// <tag>_<base58><check> form.
func appendID(b []byte, tag string, id int64, format string) ([]byte, error) {
	if format != formatPrefixed {
		return strconv.AppendInt(b, id, 10), nil
	}
	s, err := readable.Encode(tag, id)
	if err != nil {
		return b, err
	}
	return append(b, s...), nil
}

// decodeReadable turns a prefixed ID back into its tag and number.
func (s *Server) decodeReadable(c *gin.Context) {
	tag, id, err := readable.Decode(c.Param("value"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, gin.H{"tag": tag, "id": strconv.FormatInt(id, 10)})
}

// decodeSnowflake splits a snowflake ID with the server's layout.
func (s *Server) decodeSnowflake(c *gin.Context) {
	raw := c.Param("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 0 {
		s.writeError(c, errInvalidSnowflake)
		return
	}
	p, err := s.cfg.Layout.Decode(id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.PureJSON(http.StatusOK, gin.H{
		"id":        strconv.FormatInt(id, 10),
		"time":      p.Time.UTC().Format(timeLayout),
		"unix_ms":   p.Time.UnixMilli(),
		"worker_id": p.WorkerID,
		"sequence":  p.Sequence,
	})
}

// parseCount accepts exactly one count from 1 to MaxBatch. A repeated
// parameter is refused rather than guessed at.
func (s *Server) parseCount(vals []string) (int, error) {
	if len(vals) != 1 || len(vals[0]) > 9 {
		return 0, errInvalidCount
	}
	n, err := strconv.Atoi(vals[0])
	if err != nil || n < 1 || n > s.cfg.MaxBatch {
		return 0, &apiError{http.StatusBadRequest, "invalid_count",
			"count must be a whole number from 1 to " + strconv.Itoa(s.cfg.MaxBatch)}
	}
	return n, nil
}
