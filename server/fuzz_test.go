package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/server"
)

// FuzzServer_IDs throws random tags, counts, formats and headers at the
// ID and decode endpoints. Whatever comes in, the answer is never a 500
// or a panic, and every error is the documented JSON shape.
func FuzzServer_IDs(f *testing.F) {
	for _, seed := range [][4]string{
		{"order", "", "", ""},
		{"order", "5", "prefixed", "text/plain"},
		{"a b", "-1", "x", "*/*"},
		{strings.Repeat("z", 70), "99999999999", "numeric", "application/json"},
		{"../../etc", "1e3", "", "text/html"},
		{"ü", "0x10", "prefixed", ""},
		{"order';DROP TABLE id_sequence;--", "1&count=2", "", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	alloc, err := segment.New(segmenttest.NewMemory(), segment.Options{AutoCreate: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = alloc.Close() })
	toks, err := server.ParseAPITokens("fuzz-token-00001=*")
	if err != nil {
		f.Fatal(err)
	}
	h, err := server.New(server.Config{Segment: alloc, Stats: alloc, AdminToken: "admin-token-0001", APITokens: toks, MaxBatch: 100})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tag, count, format, accept string) {
		for _, path := range []string{
			"/id/" + url.PathEscape(tag) + "?count=" + url.QueryEscape(count) + "&format=" + url.QueryEscape(format),
			"/segment/" + url.PathEscape(tag) + "?format=" + url.QueryEscape(format),
			"/snowflake/decode/" + url.PathEscape(count),
			"/id/decode/" + url.PathEscape(tag),
			"/id/" + tag + "?" + count,
		} {
			req, err := http.NewRequest(http.MethodGet, "http://idgen"+path, nil)
			if err != nil {
				continue // not a request a client could send
			}
			req.Header.Set("Accept", accept)
			req.Header.Set("Authorization", "Bearer "+format)
			if len(tag)%2 == 0 {
				req.Header.Set("Authorization", "Bearer fuzz-token-00001")
			}
			req.Header.Set("X-Request-ID", count)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
			}
			if rec.Code >= 400 {
				var e struct {
					Error struct{ Code, Message string }
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
					t.Fatalf("%s: %d with a body that is not the error shape: %q", path, rec.Code, rec.Body)
				}
			}
		}
	})
}
