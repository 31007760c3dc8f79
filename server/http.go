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
		MaxHeaderBytes:    maxHeaderBytes,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: MaxConcurrentStreams},
	}
}

// MaxConcurrentStreams bounds the streams (calls) in flight on one HTTP/2
// connection, on the main port and the gRPC port (NewGRPCServer) alike:
// net/http's default, which grpc-go would leave unlimited.
const MaxConcurrentStreams = 250

// maxHeaderBytes bounds a request's header on the main port. Over HTTP/2
// net/http advertises it as maxHeaderListSize, with HTTP/2's 32 bytes of
// overhead for each of ten fields, and the gRPC port advertises and
// enforces the same.
const (
	maxHeaderBytes    = 64 << 10
	maxHeaderListSize = maxHeaderBytes + 10*32
)
