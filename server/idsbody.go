package server

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"
)

// writeIDs answers one ID as {"tag":…,"id":…}, several as
// {"tag":…,"ids":[…]}, or either as text, one per line. The JSON is
// written by hand: a valid tag and both ID formats need no escaping, and
// this is the hottest path of the service. It ends with a newline, like
// every JSON answer (PureJSON), so curl's output does not run into the
// prompt.
//
// A batch's answer is written into a buffer kept from one batch to the
// next (bodies): net/http has copied it out when Write returns.
func (s *Server) writeIDs(c *gin.Context, tag, format string, text, single bool, ids ...int64) {
	var buf *[]byte
	if len(ids) >= pooledFrom {
		buf, _ = s.bodies.Get().(*[]byte)
		if buf == nil {
			buf = new([]byte)
		}
	}
	var dst []byte
	if buf != nil {
		dst = (*buf)[:0]
	}
	contentType, b, err := idsBody(dst, tag, format, text, single, ids)
	if err != nil {
		s.writeError(c, err)
		return
	}
	writeOK(c, contentType, b)
	if buf != nil && cap(b) <= pooledMax {
		*buf = b
		s.bodies.Put(buf)
	}
}

// idsBody is the answer writeIDs writes, and the one a keyed request
// records for its repeats, appended to dst (nil for a body of its own).
func idsBody(dst []byte, tag, format string, text, single bool, ids []int64) (contentType string, body []byte, err error) {
	per := 22
	if format == formatPrefixed {
		per += len(tag) + 4
	}
	b := slices.Grow(dst[:0], 32+len(tag)+len(ids)*per)
	if !text {
		b = append(b, `{"tag":"`...)
		b = append(b, tag...)
		if single {
			b = append(b, `","id":`...)
		} else {
			b = append(b, `","ids":[`...)
		}
	}
	for i, id := range ids {
		switch {
		case text && i > 0:
			b = append(b, '\n')
		case !text && i > 0:
			b = append(b, ',')
		}
		if !text {
			b = append(b, '"')
		}
		if b, err = appendID(b, tag, id, format); err != nil {
			return "", nil, err
		}
		if !text {
			b = append(b, '"')
		}
	}
	switch {
	case text:
		if !single {
			b = append(b, '\n')
		}
		return "text/plain; charset=utf-8", b, nil
	case single:
		return "application/json", append(b, "}\n"...), nil
	default:
		return "application/json", append(b, "]}\n"...), nil
	}
}

// writeOK answers 200 with body, as c.Data would, minus its costs on the
// hot path: the header keys are already canonical, and net/http works out
// the Content-Length of a body it buffers whole (under 2 KiB) by itself.
func writeOK(c *gin.Context, contentType string, body []byte) {
	h := c.Writer.Header()
	h["Content-Type"] = []string{contentType}
	if len(body) >= 2048 {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	c.Writer.WriteHeader(http.StatusOK)
	_, _ = c.Writer.Write(body)
}

// Batches of pooledFrom IDs or more are written into a buffer of
// Server.bodies, which keeps buffers of up to pooledMax bytes. A
// count=10000 answer is about 230 KB; allocating one per request was
// three quarters of what a batch allocated, and the garbage collections
// it caused a fifth of an opaque batch's CPU (BenchmarkServeOpaque).
const (
	pooledFrom = 256
	pooledMax  = 4 << 20
)
