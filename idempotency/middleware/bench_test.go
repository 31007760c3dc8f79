package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/idempotency/middleware"
)

// BenchmarkGin times a small JSON handler on gin bare and behind the
// middleware with a new key per request (each one claims its key, runs
// the handler and records the answer), on SQLite, PostgreSQL, MariaDB
// and Redis: the middleware's cost is keyed minus bare. 8 goroutines per
// core, as the keyed benchmark of idgen's own routes.
func BenchmarkGin(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	handler := func(c *gin.Context) { c.JSON(http.StatusCreated, gin.H{"id": "1", "item": "book"}) }
	bare := gin.New()
	bare.POST("/orders", handler)
	b.Run("bare", func(b *testing.B) { benchPost(b, bare, false) })
	for _, s := range stores {
		b.Run(s.name, func(b *testing.B) {
			st := s.open(b)
			k, err := idempotency.New(st, idempotency.Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = k.Close() })
			m, err := middleware.New(k, middleware.Options{})
			if err != nil {
				b.Fatal(err)
			}
			e := gin.New()
			e.POST("/orders", m.Gin(), handler)
			b.Run("keyed", func(b *testing.B) { benchPost(b, e, true) })
		})
	}
}

func benchPost(b *testing.B, h http.Handler, keyed bool) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var n atomic.Int64
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		w := httptest.NewRecorder()
		for pb.Next() {
			req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"item":"book","qty":2}`))
			if keyed {
				req.Header[idempotency.KeyHeader] = []string{run + "-" + strconv.FormatInt(n.Add(1), 10)}
			}
			w.Body.Reset()
			clear(w.Header())
			h.ServeHTTP(w, req)
			if w.Code != http.StatusCreated {
				b.Errorf("%d %s", w.Code, w.Body)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
