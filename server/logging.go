package server

import (
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

const requestIDHeader = "X-Request-ID"

// requestIDKey is requestIDHeader in the canonical form net/http keys
// headers by: indexing the header maps with it directly skips the
// canonicalisation and validation that Get and Set do on every call.
var requestIDKey = http.CanonicalHeaderKey(requestIDHeader)

// requestID takes the caller's X-Request-ID when it is sane, or makes
// one, and echoes it in the response, so one ID follows a request
// through proxies, this server's log and the caller's log.
func requestID(c *gin.Context) {
	var id string
	if v := c.Request.Header[requestIDKey]; len(v) > 0 && saneRequestID(v[0]) {
		id = v[0]
	} else {
		id = newRequestID()
	}
	// The response header is where the access log reads it back, which
	// saves gin's per-request key map.
	c.Writer.Header()[requestIDKey] = []string{id}
	c.Next()
}

// newRequestID makes a request ID. It only has to be unlikely to repeat
// within a log's window, not unguessable: the fast generator will do.
func newRequestID() string {
	var b [8]byte
	var h [16]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	hex.Encode(h[:], b[:])
	return string(h[:])
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// accessLog writes one structured line per request, except successful
// probes and scrapes, which would drown the rest every few seconds.
func accessLog(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		status := c.Writer.Status()
		switch c.FullPath() {
		case "/healthz", "/readyz", "/metrics":
			if status == 200 {
				return
			}
		}
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelWarn
		}
		log.LogAttrs(c.Request.Context(), level, "request",
			slog.String("request_id", c.Writer.Header().Get(requestIDHeader)),
			slog.String("method", c.Request.Method),
			slog.String("path", c.Request.URL.Path),
			slog.String("route", c.FullPath()),
			slog.Int("status", status),
			slog.Int("bytes", c.Writer.Size()),
			slog.Duration("duration", time.Since(start)),
			slog.String("remote", c.ClientIP()),
		)
	}
}
