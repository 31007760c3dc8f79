package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/api/errcode"
	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/snowflake"
)

// tagAnswer is an error answer reduced to what every API shape carries.
type tagAnswer struct {
	status        int
	code, message string
}

// Every route that takes a tag, over HTTP and gRPC, in idgen's and in
// Leaf's and tinyid's shapes, answers the same bad tag with the same
// status, code and message: the one rule (idgen.CheckTag), checked once
// by the server, whatever the mode or the generator behind the route.
func TestTagRule_SameAnswerOnEveryRoute(t *testing.T) {
	t.Parallel()
	sf, err := snowflake.New(snowflake.Config{WorkerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	base, c := rpcServer(t, transports()[0], server.Config{Snowflake: snowflake.NewTagged(sf), Compat: server.Compat{Leaf: true, TinyID: true}})
	httpGet := func(method, path string) func(*testing.T) tagAnswer {
		return func(t *testing.T) tagAnswer {
			a := do(t, method, base+path, "", "")
			return tagAnswer{a.status, errCode(t, a.body), jsonMessage(t, a.body)}
		}
	}
	plain := func(path string) func(*testing.T) tagAnswer {
		return func(t *testing.T) tagAnswer {
			a := do(t, "GET", base+path, "", "")
			code, msg, _ := strings.Cut(strings.TrimSuffix(a.body, "\n"), ": ")
			return tagAnswer{a.status, code, msg}
		}
	}
	tinyidJSON := func(path string) func(*testing.T) tagAnswer {
		return func(t *testing.T) tagAnswer {
			a := do(t, "GET", base+path, "", "")
			var r struct {
				Code    int
				Message string
			}
			if err := json.Unmarshal([]byte(a.body), &r); err != nil || r.Code != 6 {
				t.Fatalf("tinyid body %q, want code 6", a.body)
			}
			code, msg, _ := strings.Cut(r.Message, ": ")
			return tagAnswer{a.status, code, msg}
		}
	}
	rpc := func(call func(ctx context.Context) error) func(*testing.T) tagAnswer {
		return func(t *testing.T) tagAnswer {
			err := call(t.Context())
			code, _, _ := idgenCode(t, err)
			status := 0
			if connect.CodeOf(err) == connect.CodeInvalidArgument {
				status = http.StatusBadRequest
			}
			var ce *connect.Error
			if !errors.As(err, &ce) {
				t.Fatalf("not a connect error: %v", err)
			}
			return tagAnswer{status, code, ce.Message()}
		}
	}
	routes := []struct {
		name   string
		answer func(tag string) func(*testing.T) tagAnswer
	}{
		{"GET /id", func(tag string) func(*testing.T) tagAnswer { return httpGet("GET", "/id/"+url.PathEscape(tag)) }},
		{"GET /segment", func(tag string) func(*testing.T) tagAnswer { return httpGet("GET", "/segment/"+url.PathEscape(tag)) }},
		{"GET /snowflake", func(tag string) func(*testing.T) tagAnswer { return httpGet("GET", "/snowflake/"+url.PathEscape(tag)) }},
		{"GET /id keyed", func(tag string) func(*testing.T) tagAnswer {
			return func(t *testing.T) tagAnswer {
				a := do(t, "GET", base+"/id/"+url.PathEscape(tag), "", "", "Idempotency-Key", "k1")
				return tagAnswer{a.status, errCode(t, a.body), jsonMessage(t, a.body)}
			}
		}},
		{"POST /segment/range", func(tag string) func(*testing.T) tagAnswer {
			return httpGet("POST", "/segment/"+url.PathEscape(tag)+"/range?size=1")
		}},
		{"Leaf segment", func(tag string) func(*testing.T) tagAnswer { return plain("/api/segment/get/" + url.PathEscape(tag)) }},
		{"Leaf snowflake", func(tag string) func(*testing.T) tagAnswer { return plain("/api/snowflake/get/" + url.PathEscape(tag)) }},
		{"tinyid nextIdSimple", func(tag string) func(*testing.T) tagAnswer {
			return plain("/tinyid/id/nextIdSimple?bizType=" + url.QueryEscape(tag))
		}},
		{"tinyid nextSegmentIdSimple", func(tag string) func(*testing.T) tagAnswer {
			return plain("/tinyid/id/nextSegmentIdSimple?bizType=" + url.QueryEscape(tag))
		}},
		{"tinyid nextId", func(tag string) func(*testing.T) tagAnswer {
			return tinyidJSON("/tinyid/id/nextId?bizType=" + url.QueryEscape(tag))
		}},
		{"tinyid nextSegmentId", func(tag string) func(*testing.T) tagAnswer {
			return tinyidJSON("/tinyid/id/nextSegmentId?bizType=" + url.QueryEscape(tag))
		}},
		{"gRPC Next segment", func(tag string) func(*testing.T) tagAnswer {
			return rpc(func(ctx context.Context) error {
				_, err := c.Next(ctx, connect.NewRequest(&idgenv1.NextRequest{Tag: tag, Mode: idgenv1.Mode_MODE_SEGMENT}))
				return err
			})
		}},
		{"gRPC Next snowflake", func(tag string) func(*testing.T) tagAnswer {
			return rpc(func(ctx context.Context) error {
				_, err := c.Next(ctx, connect.NewRequest(&idgenv1.NextRequest{Tag: tag, Mode: idgenv1.Mode_MODE_SNOWFLAKE, Count: 2}))
				return err
			})
		}},
		{"gRPC ReserveRange", func(tag string) func(*testing.T) tagAnswer {
			return rpc(func(ctx context.Context) error {
				_, err := c.ReserveRange(ctx, connect.NewRequest(&idgenv1.ReserveRangeRequest{Tag: tag, Size: 1}))
				return err
			})
		}},
	}
	for _, tc := range []struct{ name, tag string }{
		{"space", "bad tag"},
		{"65 bytes", strings.Repeat("x", 65)},
		{"non-ASCII", "ordér"},
		{"non-ASCII first", "✓"},
		{"star", "a*b"},
	} {
		want := tagAnswer{http.StatusBadRequest, "invalid_tag", errcode.Message(idgen.CheckTag(tc.tag))}
		if strings.HasPrefix(want.message, "idgen:") || strings.Contains(want.message, "\u00e2") {
			t.Fatalf("message %q: a Go package name or a mangled character reaches the caller", want.message)
		}
		for _, r := range routes {
			t.Run(tc.name+"/"+r.name, func(t *testing.T) {
				if got := r.answer(tc.tag)(t); got != want {
					t.Fatalf("%s for %q: %+v, want %+v", r.name, tc.tag, got, want)
				}
			})
		}
	}
}

func jsonMessage(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct{ Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not an error body: %q", body)
	}
	return e.Error.Message
}
