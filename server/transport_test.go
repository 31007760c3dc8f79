package server_test

import (
	"net"
	"testing"

	"connectrpc.com/connect"

	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/server"
)

// transport is one way the gRPC API is served. Every gRPC test runs over
// each, with the same gRPC client, so that the two behave the same.
type transport struct {
	name string
	// serve serves s's gRPC API on a loopback port and returns its base
	// URL.
	serve func(t testing.TB, s *server.Server) string
}

// transports are connect-go on the main port, beside gin, and grpc-go's
// own server on a listener of its own (idgen serve --grpc-addr).
func transports() []transport {
	return []transport{
		{"connect-go", func(t testing.TB, s *server.Server) string { return serveH2(t, s) }},
		{"grpc-go", serveNative},
	}
}

// serveNative serves s.NewGRPCServer in cleartext on a loopback port.
func serveNative(t testing.TB, s *server.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := s.NewGRPCServer(nil)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return "http://" + ln.Addr().String()
}

// eachTransport runs test once per transport, as a parallel subtest of
// its name, and makes t parallel (its callers must not): each run serves
// its own server, so they share nothing.
func eachTransport(t *testing.T, test func(t *testing.T, tr transport)) {
	t.Parallel()
	for _, tr := range transports() {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			test(t, tr)
		})
	}
}

// client serves s over tr and returns a gRPC client of it.
func (tr transport) client(t testing.TB, s *server.Server) idgenv1connect.IDServiceClient {
	return idgenv1connect.NewIDServiceClient(h2c(), tr.serve(t, s), connect.WithGRPC())
}
