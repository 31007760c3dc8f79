package middleware

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/idempotency"
)

// Gin adapts the middleware to gin: the handlers after it in the chain
// run once per key, and their answer is recorded and replayed.
func (m *Middleware) Gin() gin.HandlerFunc {
	return func(c *gin.Context) {
		keys := c.Request.Header[idempotency.KeyHeader]
		if keys == nil {
			c.Next()
			return
		}
		req, err := m.request(c.Request, keys)
		if err != nil {
			writeError(c.Writer, err)
			c.Abort()
			return
		}
		orig, origReq := c.Writer, c.Request
		m.serve(orig, c.Request, req, func(ctx context.Context, rec *recorder) {
			c.Writer, c.Request = &ginRecorder{ResponseWriter: orig, rec: rec}, origReq.WithContext(ctx)
			// A panic's recovery writes to the real writer.
			defer func() { c.Writer, c.Request = orig, origReq }()
			c.Next()
		})
		c.Abort()
	}
}

// ginRecorder is a gin.ResponseWriter that buffers into rec; Hijack,
// Flush and the rest reach the real writer.
type ginRecorder struct {
	gin.ResponseWriter
	rec *recorder
}

func (g *ginRecorder) Header() http.Header               { return g.rec.Header() }
func (g *ginRecorder) WriteHeader(status int)            { g.rec.WriteHeader(status) }
func (g *ginRecorder) WriteHeaderNow()                   { g.rec.wrote = true }
func (g *ginRecorder) Write(b []byte) (int, error)       { return g.rec.Write(b) }
func (g *ginRecorder) WriteString(s string) (int, error) { return g.rec.Write([]byte(s)) }
func (g *ginRecorder) Status() int                       { return g.rec.status }
func (g *ginRecorder) Size() int                         { return g.size() }
func (g *ginRecorder) Written() bool                     { return g.rec.wrote }
func (g *ginRecorder) size() int {
	if !g.rec.wrote {
		return -1
	}
	return g.rec.body.Len()
}
