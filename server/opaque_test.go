package server_test

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/store/sqlite"
)

const opaqueAdmin = "opaque-admin-token-0123456789"

func newOpaqueServer(t *testing.T, key *opaque.Key) *httptest.Server {
	t.Helper()
	st := openStore(t)
	alloc := newAllocator(t, st, segment.Options{AutoCreate: true})
	gen := opaque.NewGenerator(alloc, st, key)
	h, err := server.New(server.Config{Segment: gen, Ranges: gen, Admin: st, AdminToken: opaqueAdmin, OpaqueKey: key})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// The admin API creates, lists and decodes opaque tags, and refuses what
// would break them, each with its own code.
func TestAdmin_OpaqueTags(t *testing.T) {
	t.Parallel()
	key, err := opaque.ParseKey("000102030405060708090a0b0c0d0e0f")
	if err != nil {
		t.Fatal(err)
	}
	keyless, keyed := newOpaqueServer(t, nil), newOpaqueServer(t, key)

	if a := do(t, "POST", keyless.URL+"/admin/tags", opaqueAdmin, `{"tag":"o","opaque":true}`); a.status != 400 || errCode(t, a.body) != "opaque_key_missing" {
		t.Fatalf("create opaque without a key: %d %s", a.status, a.body)
	}
	if a := do(t, "GET", keyless.URL+"/admin/opaque/o/5", opaqueAdmin, ""); a.status != 400 || errCode(t, a.body) != "opaque_key_missing" {
		t.Fatalf("decode without a key: %d %s", a.status, a.body)
	}
	if a := do(t, "POST", keyed.URL+"/admin/tags", opaqueAdmin, `{"tag":"o","step":10,"opaque":true}`); a.status != 201 || !strings.Contains(a.body, `"opaque":true`) || !strings.Contains(a.body, key.Fingerprint()) {
		t.Fatalf("create opaque: %d %s", a.status, a.body)
	}
	a := do(t, "GET", keyed.URL+"/id/o", "", "")
	var id int64
	if i := strings.Index(a.body, `"id":"`); i >= 0 {
		id, _ = strconv.ParseInt(strings.SplitN(a.body[i+6:], `"`, 2)[0], 10, 64)
	}
	if c, err := key.Decode("o", id); a.status != 200 || err != nil || c != 1 {
		t.Fatalf("first opaque ID: %d %s decodes to %d, %v", a.status, a.body, c, err)
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, contains           string
	}{
		{"decode", "GET", "/admin/opaque/o/" + strconv.FormatInt(id, 10), "", 200, "", `"counter":"1"`},
		{"decode 0", "GET", "/admin/opaque/o/0", "", 400, "invalid_id", ""},
		{"decode not a number", "GET", "/admin/opaque/o/x1", "", 400, "invalid_id", ""},
		{"decode bad tag", "GET", "/admin/opaque/bad%20tag/5", "", 400, "invalid_tag", ""},
		{"list", "GET", "/admin/tags", "", 200, "", `"opaque":true,"key_fingerprint":"` + key.Fingerprint() + `"`},
		{"switch an opaque tag", "PATCH", "/admin/tags/o", `{"opaque":false}`, 409, "opaque_fixed", ""},
		{"range of an opaque tag", "POST", "/segment/o/range?size=5", "", 409, "opaque_tag_range", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, tc.method, keyed.URL+tc.path, opaqueAdmin, tc.body)
			if a.status != tc.status || (tc.code != "" && errCode(t, a.body) != tc.code) || !strings.Contains(a.body, tc.contains) {
				t.Fatalf("%s %s = %d %s, want %d %s %s", tc.method, tc.path, a.status, a.body, tc.status, tc.code, tc.contains)
			}
		})
	}
	// A plain tag on the keyed server stays plain and can't switch.
	if a := do(t, "GET", keyed.URL+"/id/plain", "", ""); a.status != 200 || !strings.Contains(a.body, `"id":"1"`) {
		t.Fatalf("plain tag: %d %s", a.status, a.body)
	}
	if a := do(t, "PATCH", keyed.URL+"/admin/tags/plain", opaqueAdmin, `{"opaque":true}`); a.status != 409 || errCode(t, a.body) != "opaque_fixed" {
		t.Fatalf("switch a used plain tag: %d %s", a.status, a.body)
	}
}

// opaqueTagStore returns a key and a store holding the opaque tag "o"
// under it, step 10.
func opaqueTagStore(t *testing.T) (*opaque.Key, *sqlite.Store) {
	t.Helper()
	key, err := opaque.ParseKey("000102030405060708090a0b0c0d0e0f")
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	if err := st.CreateTag(t.Context(), segment.Tag{Name: "o", MaxID: 1, Step: 10, Opaque: key.Fingerprint()}); err != nil {
		t.Fatal(err)
	}
	return key, st
}

// Leaf's and tinyid's routes follow the tag's setting: an opaque tag's
// counter never leaves the server through them either.
func TestCompat_OpaqueTags(t *testing.T) {
	t.Parallel()
	key, st := opaqueTagStore(t)
	alloc := newAllocator(t, st, segment.Options{})
	gen := opaque.NewGenerator(alloc, st, key)
	h, err := server.New(server.Config{Segment: gen, Ranges: gen, Compat: server.Compat{Leaf: true, TinyID: true}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	var got []int64
	for _, path := range []string{"/api/segment/get/o", "/tinyid/id/nextIdSimple?bizType=o&batchSize=3"} {
		a := do(t, "GET", ts.URL+path, "", "")
		if a.status != 200 {
			t.Fatalf("GET %s = %d %s", path, a.status, a.body)
		}
		for _, f := range strings.Split(strings.TrimSpace(a.body), ",") {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("GET %s: %q is not an ID", path, a.body)
			}
			got = append(got, id)
		}
	}
	for i, id := range got {
		if c, err := key.Decode("o", id); err != nil || c != int64(i+1) {
			t.Fatalf("compat ID %d decodes to %d, %v; want counter %d", id, c, err, i+1)
		}
	}
}

// Over gRPC an opaque tag answers as over HTTP: opaque IDs from Next, a
// range refused as final (FAILED_PRECONDITION, not the ALREADY_EXISTS
// that HTTP's 409 would map to), and an instance without the key
// UNAVAILABLE, so the caller tries another.
func TestGRPC_OpaqueTags(t *testing.T) {
	t.Parallel()
	key, st := opaqueTagStore(t)
	serve := func(k *opaque.Key) (string, idgenv1connect.IDServiceClient) {
		gen := opaque.NewGenerator(newAllocator(t, st, segment.Options{}), st, k)
		h, err := server.New(server.Config{Segment: gen, Ranges: gen, OpaqueKey: k})
		if err != nil {
			t.Fatal(err)
		}
		base := serveH2(t, h)
		return base, idgenv1connect.NewIDServiceClient(h2c(), base, connect.WithGRPC())
	}
	keyed, kc := serve(key)
	keyless, lc := serve(nil)

	resp, err := kc.Next(t.Context(), connect.NewRequest(&idgenv1.NextRequest{Tag: "o", Count: 3}))
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range resp.Msg.GetIds() {
		if c, err := key.Decode("o", id); err != nil || c != int64(i+1) {
			t.Fatalf("opaque ID %d decodes to %d, %v; want counter %d", id, c, err, i+1)
		}
	}
	for _, tc := range []struct {
		name, base, path string
		call             func() error
		status           int
		code             string
		rpc              connect.Code
	}{
		{"range of an opaque tag", keyed, "/segment/o/range?size=5", func() error {
			_, err := kc.ReserveRange(t.Context(), connect.NewRequest(&idgenv1.ReserveRangeRequest{Tag: "o", Size: 5}))
			return err
		}, 409, "opaque_tag_range", connect.CodeFailedPrecondition},
		{"instance without the key", keyless, "/id/o", func() error {
			_, err := lc.Next(t.Context(), connect.NewRequest(&idgenv1.NextRequest{Tag: "o"}))
			return err
		}, 503, "opaque_key_missing", connect.CodeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "GET"
			if strings.Contains(tc.path, "/range") {
				method = "POST"
			}
			if a := do(t, method, tc.base+tc.path, "", ""); a.status != tc.status || errCode(t, a.body) != tc.code {
				t.Fatalf("HTTP %s: %d %s, want %d %s", tc.path, a.status, a.body, tc.status, tc.code)
			}
			err := tc.call()
			if code, _, _ := idgenCode(t, err); connect.CodeOf(err) != tc.rpc || code != tc.code {
				t.Fatalf("gRPC: %v (reason %q), want %v %s", err, code, tc.rpc, tc.code)
			}
		})
	}
}
