// Package server is idgen's HTTP API, built on gin, and its gRPC API. It
// adapts the generators of package idgen to HTTP and gRPC and owns the
// one mapping from errors to status codes and stable error codes
// (errors.go, errtable.go): handlers return errors and never pick a
// status themselves.
//
// IDs are issued and ranges reserved in one place, the service
// (service.go), which counts them in the metrics and runs the
// idempotency protocol. The transports are adapters over it: gin's
// routes (server.go, rangez.go, compat.go), connect-go on the main port
// (connect.go) and grpc-go on a port of its own (grpcnative.go), the two
// gRPC ones sharing the calls of rpcapi.go.
//
// Every error answer has the shape
//
//	{"error":{"code":"invalid_tag","message":"…what to do…"}}
//
// and bad input always gets a 4xx, never a 500, a panic or a stack trace.
//
// gin lists every route on stdout when New builds the engine in gin's
// debug mode. That mode is process-wide, with no per-engine switch, so
// this package never sets it: the program does (cmd/idgen runs gin in
// release mode; package idgentest settles gin's test-mode default in
// test binaries).
package server
