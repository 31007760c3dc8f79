package server_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

// The two ports that serve gRPC, the main one (--addr, connect-go through
// net/http) and grpc-go's own (--grpc-addr), are equally strict: the same
// HTTP/2 limits, and the same bounded metrics, whatever a caller sends,
// with or without the API token.
func TestPorts_LimitsAndMetricsAlike(t *testing.T) {
	t.Parallel()
	type port struct {
		name string
		addr func(main string, s *server.Server) string
	}
	ports := []port{
		{"main", func(main string, _ *server.Server) string { return main }},
		{"grpc", func(_ string, s *server.Server) string { return strings.TrimPrefix(serveNative(t, s), "http://") }},
	}
	configs := []struct {
		name string
		cfg  server.Config
	}{
		{"open", server.Config{}},
		{"tokens", server.Config{APITokens: server.APITokens{"secret-token-0123456789": {"order"}}}},
	}
	settings := map[string][2]uint32{}
	for _, cf := range configs {
		for _, p := range ports {
			t.Run(cf.name+"/"+p.name, func(t *testing.T) {
				cfg := cf.cfg
				cfg.Metrics = server.NewMetrics()
				h, base := rpcHandler(t, cfg)
				addr := p.addr(strings.TrimPrefix(base, "http://"), h)

				streams, headers := h2Settings(t, addr)
				settings[p.name] = [2]uint32{streams, headers}
				if streams != 250 {
					t.Errorf("MAX_CONCURRENT_STREAMS %d, want %d", streams, 250)
				}

				conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				ctx := t.Context()
				health := healthpb.NewHealthClient(conn)
				// A header list within the limit is served, one past it
				// is not, on either port.
				for _, tc := range []struct {
					pad  int
					want codes.Code
				}{{32 << 10, codes.OK}, {int(headers) + 1, codes.Unknown}} {
					_, err := health.Check(metadata.AppendToOutgoingContext(ctx, "x-pad", strings.Repeat("p", tc.pad)), &healthpb.HealthCheckRequest{})
					if got := status.Code(err); (got == codes.OK) != (tc.want == codes.OK) {
						t.Errorf("a header of %d bytes: %v (%v)", tc.pad, got, err)
					}
				}

				series := func() int { return rpcSeries(t, base) }
				before := series()
				for i := range 200 {
					for _, method := range []string{fmt.Sprintf("/made%d.v1.S/M", i), fmt.Sprintf("/idgen.v1.IDService/Made%d", i)} {
						err := conn.Invoke(ctx, method, &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse))
						if status.Code(err) != codes.Unimplemented {
							t.Fatalf("%s: %v, want Unimplemented", method, err)
						}
					}
				}
				if after := series(); after > before+1 {
					t.Errorf("400 calls of unknown methods took the gRPC series from %d to %d", before, after)
				}
			})
		}
		if settings["main"] != settings["grpc"] {
			t.Errorf("%s: the main port's HTTP/2 limits (streams, header list) are %v, the gRPC port's %v", cf.name, settings["main"], settings["grpc"])
		}
	}
}

// rpcHandler is rpcTargets's server, with its main port's base URL.
func rpcHandler(t *testing.T, cfg server.Config) (*server.Server, string) {
	t.Helper()
	st := openStore(t)
	alloc := newAllocator(t, st, segment.Options{AutoCreate: true})
	cfg.Segment, cfg.Ranges, cfg.Ready = alloc, alloc, st.Ping
	h, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, serveH2(t, h)
}

// rpcSeries counts the series of idgen_grpc_request_duration_seconds the
// main port's /metrics shows.
func rpcSeries(t *testing.T, base string) int {
	n := 0
	for line := range strings.Lines(do(t, "GET", base+"/metrics", "", "").body) {
		if strings.HasPrefix(line, "idgen_grpc_request_duration_seconds_count") {
			n++
		}
	}
	return n
}

// h2Settings opens a cleartext HTTP/2 connection to addr and returns the
// MAX_CONCURRENT_STREAMS and MAX_HEADER_LIST_SIZE of the server's first
// SETTINGS frame (0 for one it does not send).
func h2Settings(t *testing.T, addr string) (streams, headers uint32) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// The client preface, then an empty SETTINGS frame.
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			t.Fatalf("reading %s's SETTINGS: %v", addr, err)
		}
		length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		payload := make([]byte, length)
		if _, err := io.ReadFull(r, payload); err != nil {
			t.Fatal(err)
		}
		const settingsFrame, ack = 4, 1
		if hdr[3] != settingsFrame || hdr[4]&ack != 0 {
			continue
		}
		for p := payload; len(p) >= 6; p = p[6:] {
			switch id, v := binary.BigEndian.Uint16(p), binary.BigEndian.Uint32(p[2:]); id {
			case 3:
				streams = v
			case 6:
				headers = v
			}
		}
		return streams, headers
	}
}
