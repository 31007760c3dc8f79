// Package idgenv1 is the generated Go code of idgen's gRPC API,
// api/idgen/v1/idgen.proto: the messages, grpc-go's service descriptor
// (idgen_grpc.pb.go, which idgen serve --grpc-addr registers), and in
// idgenv1connect the connect-go client and handler. The server side lives
// in package server, which serves the API beside HTTP on one port;
// package client uses it as a transport.
//
// Regenerate with go generate ./api/idgen/v1 after editing the .proto
// file: buf (pinned in api/tools/go.mod) runs protoc-gen-go,
// protoc-gen-connect-go and protoc-gen-go-grpc (pinned as tools in
// idgen's go.mod). A test fails while the checked-in code differs from
// what they generate, or while buf lint finds fault with the .proto file.
package idgenv1

//go:generate go -C ../.. tool -modfile=tools/go.mod buf generate
