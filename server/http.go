package server

import (
	"net/http"
	"time"
)

// NewHTTPServer wraps h in an http.Server with timeouts, so that slow or
// idle clients cannot hold connections open: headers must arrive within
// 5 s, a whole request within 15 s, and a response is written within 30 s.
//
// It speaks HTTP/1.1 and HTTP/2, over TLS (negotiated by ALPN) and in
// cleartext (h2c with prior knowledge, as gRPC clients send it), so that
// gRPC and HTTP share one port. Over HTTP/2 the read and write timeouts
// apply to each stream, the idle timeout to the connection.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		Protocols:         p,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
