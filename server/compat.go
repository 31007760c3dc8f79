package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// Compat switches on the HTTP APIs of other ID services beside idgen's
// own, so their callers can move to idgen by changing a host name. The
// routes share the auth, metrics, limits and generators of idgen's own;
// only the shape of the answers differs.
type Compat struct {
	// Leaf serves Meituan Leaf's routes: GET /api/segment/get/{key} and
	// /api/snowflake/get/{key}, answering the bare ID, and
	// /decodeSnowflakeId?snowflakeId=N.
	Leaf bool
	// TinyID serves didi tinyid's /tinyid/id/nextId, /nextIdSimple,
	// /nextSegmentId and /nextSegmentIdSimple, by GET or POST as tinyid
	// does (its Java client POSTs).
	TinyID bool
}

// ParseCompat reads a comma-separated list of APIs: leaf, tinyid. The
// empty string is none.
func ParseCompat(s string) (Compat, error) {
	var c Compat
	for _, name := range strings.Split(s, ",") {
		switch strings.TrimSpace(name) {
		case "":
		case "leaf":
			c.Leaf = true
		case "tinyid":
			c.TinyID = true
		default:
			return Compat{}, fmt.Errorf("server: unknown compat API %q: use leaf, tinyid or both, comma-separated", name)
		}
	}
	return c, nil
}

// plainErrors is the gin context key that makes writeError answer in
// plain text: Leaf's and tinyid's callers read bodies as text, and a
// status of 4xx or 503 with a readable line serves them better than an ID
// of -1 or an empty 200.
const plainErrors = "idgen.plainErrors"

func plainText(c *gin.Context) { c.Set(plainErrors, true) }

// tinyidMaxBatch is tinyid's own batch.size.max.
const tinyidMaxBatch = 100000

func (s *Server) compatRoutes(e *gin.Engine, c Compat) {
	if c.Leaf {
		e.GET("/api/segment/get/:tag", noStore, plainText, s.noKeys, s.requireTag, s.leafID(ModeSegment))
		e.GET("/api/snowflake/get/:tag", noStore, plainText, s.noKeys, s.requireTag, s.leafID(ModeSnowflake))
		e.GET("/decodeSnowflakeId", plainText, s.leafDecode)
	}
	if c.TinyID {
		// tinyid's controller maps every method; GET and POST are the
		// ones its callers use.
		methods := []string{http.MethodGet, http.MethodPost}
		e.Match(methods, "/tinyid/id/nextIdSimple", noStore, plainText, s.noKeys, s.tinyid(false))
		e.Match(methods, "/tinyid/id/nextId", noStore, s.noKeys, s.tinyid(true))
		e.Match(methods, "/tinyid/id/nextSegmentIdSimple", noStore, plainText, s.noKeys, s.tinyidSegment(false))
		e.Match(methods, "/tinyid/id/nextSegmentId", noStore, s.noKeys, s.tinyidSegment(true))
	}
}

// leafID answers one ID as Leaf does: status 200 and the decimal digits
// as the whole body.
func (s *Server) leafID(mode string) gin.HandlerFunc {
	return func(c *gin.Context) {
		var one [1]int64
		ids, err := s.svc.issue(c.Request.Context(), s.gens[mode], mode, c.Param("tag"), 0, one[:0])
		if err != nil {
			s.writeError(c, err)
			return
		}
		c.Data(http.StatusOK, "text/plain; charset=utf-8", strconv.AppendInt(nil, ids[0], 10))
	}
}

// leafDecode answers Leaf's /decodeSnowflakeId with Leaf's keys and
// string values, in the order Leaf's HashMap writes them, decoded with
// the server's layout. The time is in the server's local time zone, as
// Leaf's is (TZ).
func (s *Server) leafDecode(c *gin.Context) {
	vals := c.Request.URL.Query()["snowflakeId"]
	var id int64 = -1
	if len(vals) == 1 {
		if n, err := strconv.ParseInt(vals[0], 10, 64); err == nil {
			id = n
		}
	}
	if id < 0 {
		s.writeError(c, &apiError{http.StatusBadRequest, "invalid_id", "snowflakeId must be one non-negative decimal 64-bit integer"})
		return
	}
	p, err := s.cfg.Layout.Decode(id)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ms := p.Time.UnixMilli()
	b := make([]byte, 0, 112)
	b = append(b, `{"workerId":"`...)
	b = strconv.AppendInt(b, p.WorkerID, 10)
	b = append(b, `","sequenceId":"`...)
	b = strconv.AppendInt(b, p.Sequence, 10)
	b = append(b, `","timestamp":"`...)
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, '(')
	b = time.UnixMilli(ms).Local().AppendFormat(b, "2006-01-02 15:04:05.000")
	b = append(b, `)"}`...)
	c.Data(http.StatusOK, "application/json", b)
}

// tinyid serves tinyid's nextId (JSON) and nextIdSimple (text). The
// token query parameter is checked against the client tokens as a bearer
// token would be, and errors keep idgen's status codes: in nextId's body
// as tinyid's code 5 (token) or 6 (anything else) with idgen's message;
// in nextIdSimple's as a plain-text line, never the empty 200 tinyid
// gives.
func (s *Server) tinyid(asJSON bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		q, tag, fail, ok := s.tinyidRequest(c, asJSON)
		if !ok {
			return
		}
		n := 1
		if v, ok := q["batchSize"]; ok {
			var err error
			// tinyid caps a larger batch at its maximum rather than refusing it.
			if len(v) != 1 || len(v[0]) > 9 {
				err = errInvalidCount
			} else if n, err = strconv.Atoi(v[0]); err != nil || n < 1 {
				err = errInvalidCount
			}
			if err != nil {
				fail(err)
				return
			}
			n = min(n, s.cfg.MaxBatch, tinyidMaxBatch)
		}
		ids, err := s.svc.issue(c.Request.Context(), s.gens[ModeSegment], ModeSegment, tag, n, nil)
		if err != nil {
			fail(err)
			return
		}
		b := make([]byte, 0, 16+len(ids)*20)
		if asJSON {
			b = append(b, `{"data":[`...)
		}
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, id, 10)
		}
		if asJSON {
			c.Data(http.StatusOK, "application/json", append(b, `],"code":200,"message":""}`...))
			return
		}
		c.Data(http.StatusOK, "text/plain; charset=utf-8", b)
	}
}

// tinyidFail returns the error answer of a tinyid route: in the JSON
// form, tinyid's Response with code 5 (token) or 6 (anything else) and
// idgen's message; in the text form, one plain-text line. Both keep
// idgen's status, never tinyid's 200.
func (s *Server) tinyidFail(c *gin.Context, asJSON bool) func(error) {
	return func(err error) {
		if !asJSON {
			s.writeError(c, err)
			return
		}
		ae := s.answer(c, err)
		s.record(c, ae, err)
		code := 6
		if ae == errUnauthorized || ae == errForbidden || ae == errAdminOnIDs {
			code = 5
		}
		c.AbortWithStatusJSON(ae.status, tinyidResponse{Code: code, Message: ae.code + ": " + ae.message})
	}
}

// tinyidRequest reads a tinyid request's query and admits it for its
// bizType (admitTag), with the token query parameter or else a bearer
// token. fail answers an error in the route's shape (tinyidFail); ok is
// false when the request has been answered already.
func (s *Server) tinyidRequest(c *gin.Context, asJSON bool) (q url.Values, tag string, fail func(error), ok bool) {
	q = c.Request.URL.Query()
	tag = q.Get("bizType")
	fail = s.tinyidFail(c, asJSON)
	var tok string
	if !s.auth.apiOpen {
		if tok = q.Get("token"); tok == "" {
			tok, _ = bearer(c)
		}
	}
	if err := s.admitTag(tok, tok != "", tag); err != nil {
		fail(err)
		return q, tag, fail, false
	}
	return q, tag, fail, true
}

// tinyidResponse is tinyid's Response, its fields in tinyid's order.
type tinyidResponse struct {
	Data    any    `json:"data"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}
