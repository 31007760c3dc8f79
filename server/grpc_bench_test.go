package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/server"

	"github.com/idgen/idgen/internal/benchcpu"
)

// grpcBody is msg in a gRPC envelope: no compression, 4-byte length.
func grpcBody(b *testing.B, msg proto.Message) []byte {
	m, err := proto.Marshal(msg)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]byte, 5, 5+len(m))
	binary.BigEndian.PutUint32(out[1:], uint32(len(m))) //nolint:gosec // G115: a few bytes
	return append(out, m...)
}

// benchRPC calls procedure of h with body as an HTTP/2 gRPC request, as
// a client's would arrive, without the network.
func benchRPC(b *testing.B, h http.Handler, procedure string, body []byte) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := &discard{h: http.Header{}}
		r := bytes.NewReader(body)
		for pb.Next() {
			clear(w.h)
			r.Reset(body)
			req := httptest.NewRequest(http.MethodPost, procedure, io.NopCloser(r))
			req.ProtoMajor, req.ProtoMinor, req.Proto = 2, 0, "HTTP/2.0"
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			req.Header.Set("Grpc-Accept-Encoding", "gzip")
			h.ServeHTTP(w, req)
			if w.h.Get("Grpc-Status") != "" && w.h.Get("Grpc-Status") != "0" {
				b.Fatalf("grpc-status %s: %s", w.h.Get("Grpc-Status"), w.h.Get("Grpc-Message"))
			}
		}
	})
}

// floorRPC is internal/bench/cmd/floor's bare connect handler: Next answers a
// counter.
type floorRPC struct {
	idgenv1connect.UnimplementedIDServiceHandler
	n *atomic.Int64
}

func (f floorRPC) Next(_ context.Context, req *connect.Request[idgenv1.NextRequest]) (*connect.Response[idgenv1.NextResponse], error) {
	return connect.NewResponse(&idgenv1.NextResponse{Tag: req.Msg.GetTag(), Ids: []int64{f.n.Add(1)}}), nil
}

// BenchmarkServeGRPC is unary Next through the whole server (metrics on,
// as in the binary) beside a bare connect handler with the same
// compression threshold: the gap is idgen's own cost per call, without
// the network and HTTP/2 framing, which both share.
func BenchmarkServeGRPC(b *testing.B) {
	h := benchServer(b)
	body := grpcBody(b, &idgenv1.NextRequest{Tag: "order"})
	b.Run("idgen", func(b *testing.B) { benchRPC(b, h, idgenv1connect.IDServiceNextProcedure, body) })
	var n atomic.Int64
	_, floor := idgenv1connect.NewIDServiceHandler(floorRPC{n: &n}, connect.WithCompressMinBytes(server.RPCCompressMinBytes))
	b.Run("floor", func(b *testing.B) { benchRPC(b, floor, idgenv1connect.IDServiceNextProcedure, body) })
	batch := grpcBody(b, &idgenv1.NextRequest{Tag: "order", Count: 1000})
	b.Run("idgen-batch1000", func(b *testing.B) { benchRPC(b, h, idgenv1connect.IDServiceNextProcedure, batch) })
}

// floorNative is internal/bench/cmd/floor's bare grpc-go handler: Next
// answers a counter, through the generated handler, with no interceptor.
type floorNative struct {
	idgenv1.UnimplementedIDServiceServer
	n *atomic.Int64
}

func (f floorNative) Next(_ context.Context, in *idgenv1.NextRequest) (*idgenv1.NextResponse, error) {
	return &idgenv1.NextResponse{Tag: in.GetTag(), Ids: []int64{f.n.Add(1)}}, nil
}

// benchNative calls unary Next on a grpc-go server on a loopback port
// through one grpc-go client connection, 8 callers per core.
func benchNative(b *testing.B, gs *grpc.Server) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	req := &idgenv1.NextRequest{Tag: "order"}
	if err := cc.Invoke(b.Context(), idgenv1connect.IDServiceNextProcedure, req, new(idgenv1.NextResponse)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	defer benchcpu.Report(b)()
	b.RunParallel(func(pb *testing.PB) {
		out := new(idgenv1.NextResponse)
		for pb.Next() {
			if err := cc.Invoke(context.Background(), idgenv1connect.IDServiceNextProcedure, req, out); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkServeGRPCNative is unary Next on grpc-go's own server and
// transport (idgen serve --grpc-addr), client included, beside the bare
// grpc-go handler of the floor: the gap is idgen's own cost per call
// (its interceptor, metrics, auth check and allocator), as the live
// benchmark measures it between processes.
func BenchmarkServeGRPCNative(b *testing.B) {
	b.Run("idgen", func(b *testing.B) { benchNative(b, benchServer(b).NewGRPCServer(nil)) })
	b.Run("floor", func(b *testing.B) {
		gs := grpc.NewServer()
		idgenv1.RegisterIDServiceServer(gs, floorNative{n: new(atomic.Int64)})
		benchNative(b, gs)
	})
}
