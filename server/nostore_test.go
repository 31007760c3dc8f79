package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/snowflake"
)

// Every route that issues IDs, over HTTP and the Connect protocol, in
// idgen's, Leaf's and tinyid's shapes, answers with Cache-Control:
// no-store, its errors too: every call consumes IDs, so no cache may hand
// one answer to two callers. Routes that issue nothing stay cacheable.
func TestNoStore_EveryIDRoute(t *testing.T) {
	t.Parallel()
	sf, err := snowflake.New(snowflake.Config{WorkerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := rpcServer(t, transports()[0], server.Config{Snowflake: snowflake.NewTagged(sf), MaxBatch: 50,
		Compat: server.Compat{Leaf: true, TinyID: true}})
	const next, rangeRPC = idgenv1connect.IDServiceNextProcedure, idgenv1connect.IDServiceReserveRangeProcedure
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		noStore                  bool
	}{
		{"id", "GET", "/id/order", "", 200, true},
		{"id batch", "GET", "/id/order?count=3", "", 200, true},
		{"id prefixed", "GET", "/id/order?format=prefixed", "", 200, true},
		{"id unknown tag", "GET", "/id/nosuch", "", 404, true},
		{"id bad tag", "GET", "/id/a%20b", "", 400, true},
		{"id bad count", "GET", "/id/order?count=0", "", 400, true},
		{"id HEAD (curl -sI)", "HEAD", "/id/order", "", 405, true},
		{"id POST", "POST", "/id/order", "", 405, true},
		{"segment", "GET", "/segment/order", "", 200, true},
		{"segment batch", "GET", "/segment/order?count=2", "", 200, true},
		{"snowflake", "GET", "/snowflake/order", "", 200, true},
		{"snowflake batch", "GET", "/snowflake/order?count=2", "", 200, true},
		{"range", "POST", "/segment/order/range?size=10", "", 200, true},
		{"range bad size", "POST", "/segment/order/range?size=0", "", 400, true},
		{"leaf segment", "GET", "/api/segment/get/order", "", 200, true},
		{"leaf segment unknown", "GET", "/api/segment/get/nosuch", "", 404, true},
		{"leaf snowflake", "GET", "/api/snowflake/get/order", "", 200, true},
		{"tinyid simple", "GET", "/tinyid/id/nextIdSimple?bizType=order", "", 200, true},
		{"tinyid json", "POST", "/tinyid/id/nextId?bizType=order&batchSize=2", "", 200, true},
		{"tinyid segment simple", "GET", "/tinyid/id/nextSegmentIdSimple?bizType=order", "", 200, true},
		{"tinyid segment json", "GET", "/tinyid/id/nextSegmentId?bizType=order", "", 200, true},
		{"connect next", "POST", next, `{"tag":"order"}`, 200, true},
		{"connect next unknown tag", "POST", next, `{"tag":"nosuch"}`, 404, true},
		{"connect range", "POST", rangeRPC, `{"tag":"order","size":5}`, 200, true},
		{"connect range bad size", "POST", rangeRPC, `{"tag":"order","size":0}`, 400, true},
		// Nothing issued: these may be cached.
		{"snowflake decode", "GET", "/snowflake/decode/120649686288695296", "", 200, false},
		{"healthz", "GET", "/healthz", "", 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.body != "" {
				hdr = []string{"Content-Type", "application/json"}
			}
			a := do(t, tc.method, base+tc.path, "", tc.body, hdr...)
			if a.status != tc.status {
				t.Fatalf("%s %s: status %d, want %d; body %s", tc.method, tc.path, a.status, tc.status, a.body)
			}
			got := a.header.Get("Cache-Control")
			if tc.noStore && got != "no-store" {
				t.Fatalf("%s %s: Cache-Control %q, want no-store", tc.method, tc.path, got)
			}
			if !tc.noStore && got != "" {
				t.Fatalf("%s %s: Cache-Control %q on a route that issues nothing", tc.method, tc.path, got)
			}
		})
	}
}

// Next consumes IDs, so it is not NO_SIDE_EFFECTS: the Connect protocol's
// GET, which caches may keep, is refused, while the decoders, which have
// none, still take it.
func TestConnect_NextRefusesGET(t *testing.T) {
	t.Parallel()
	base, _ := rpcServer(t, transports()[0], server.Config{})
	a := do(t, "GET", base+idgenv1connect.IDServiceNextProcedure+"?encoding=json&message="+`%7B%22tag%22%3A%22order%22%7D`, "", "")
	if a.status != http.StatusMethodNotAllowed || strings.Contains(a.body, "1001") {
		t.Fatalf("Connect GET of Next: %d %s, want 405 and no ID", a.status, a.body)
	}
	if a.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Connect GET of Next: Cache-Control %q, want no-store", a.header.Get("Cache-Control"))
	}
	a = do(t, "GET", base+idgenv1connect.IDServiceDecodeSnowflakeProcedure+"?encoding=json&message="+`%7B%22id%22%3A%22120649686288695296%22%7D`, "", "")
	if a.status != http.StatusOK {
		t.Fatalf("Connect GET of DecodeSnowflake: %d %s", a.status, a.body)
	}
	// The ID of the refused GET was never taken.
	a = do(t, "POST", base+idgenv1connect.IDServiceNextProcedure, "", `{"tag":"order"}`, "Content-Type", "application/json")
	if a.status != 200 || !strings.Contains(a.body, `"1001"`) {
		t.Fatalf("Connect POST of Next after the refused GET: %d %s, want ID 1001", a.status, a.body)
	}
}
