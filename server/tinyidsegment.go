package server

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/segment"
)

// tinyidLoadingPercent is how far into a segment tinyid's client starts
// loading the next one: tinyid's server sets loadingId that far in.
const tinyidLoadingPercent = 20

// tinyidSegment serves tinyid's nextSegmentId (JSON) and
// nextSegmentIdSimple (text), through which tinyid's Java client fetches
// whole segments and hands out their IDs itself. The segment is reserved
// straight from the store, as POST /segment/{tag}/range reserves one, one
// step of the tag long: no ID in it is handed out by idgen or by any
// other caller. tinyid's client issues (currentId, maxId], so idgen's
// range [start, end) is sent as currentId = start-1, maxId = end-1, with
// delta 1 and remainder 0 (idgen issues every integer).
func (s *Server) tinyidSegment(asJSON bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		_, tag, fail, ok := s.tinyidRequest(c, asJSON)
		if !ok {
			return
		}
		r, err := s.svc.reserve(c.Request.Context(), tag, 1)
		if err != nil {
			fail(err)
			return
		}
		if asJSON {
			c.Data(http.StatusOK, "application/json", appendTinyidSegmentJSON(make([]byte, 0, 128), r))
			return
		}
		c.Data(http.StatusOK, "text/plain; charset=utf-8", appendTinyidSegmentText(make([]byte, 0, 80), r))
	}
}

// tinyidSegmentFields are tinyid's SegmentId fields for r.
func tinyidSegmentFields(r segment.Range) (current, loading, maxID int64) {
	size := r.Size()
	// size*20/100 without overflow, rounded down as tinyid's is.
	loadIn := size/100*tinyidLoadingPercent + size%100*tinyidLoadingPercent/100
	current = r.Start - 1
	return current, current + loadIn, r.End - 1
}

// appendTinyidSegmentText appends the answer of nextSegmentIdSimple:
// currentId,loadingId,maxId,delta,remainder.
func appendTinyidSegmentText(b []byte, r segment.Range) []byte {
	current, loading, maxID := tinyidSegmentFields(r)
	b = strconv.AppendInt(b, current, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, loading, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, maxID, 10)
	return append(b, ",1,0"...)
}

// appendTinyidSegmentJSON appends the answer of nextSegmentId: tinyid's
// Response around its SegmentId, whose properties its JSON mapper
// writes in the order the class declares them.
func appendTinyidSegmentJSON(b []byte, r segment.Range) []byte {
	current, loading, maxID := tinyidSegmentFields(r)
	b = append(b, `{"data":{"maxId":`...)
	b = strconv.AppendInt(b, maxID, 10)
	b = append(b, `,"loadingId":`...)
	b = strconv.AppendInt(b, loading, 10)
	b = append(b, `,"currentId":`...)
	b = strconv.AppendInt(b, current, 10)
	return append(b, `,"delta":1,"remainder":0},"code":200,"message":""}`...)
}
