package server

import (
	"net/http"
	"time"
)

// NewHTTPServer wraps h in an http.Server with timeouts, so that slow or
// idle clients cannot hold connections open: headers must arrive within
// 5 s, a whole request within 15 s, and a response is written within 30 s.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
