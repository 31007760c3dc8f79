package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("../api/openapi.yaml")
	if err != nil {
		t.Fatalf("load api/openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("api/openapi.yaml is not valid OpenAPI 3: %v", err)
	}
	return doc
}

var ginParam = regexp.MustCompile(`[:*]([A-Za-z_]+)`)

// Every route the server registers must be documented.
func TestOpenAPI_DocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	h := newFullServer(t)
	routes := h.Routes()
	if len(routes) < 10 {
		t.Fatalf("only %d routes registered; the test server is not the full API", len(routes))
	}
	for _, r := range routes {
		path := ginParam.ReplaceAllString(r[1], "{$1}")
		if path == "/ui/{filepath}" {
			path = "/ui/{file}"
		}
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(r[0]) == nil {
			t.Errorf("route %s %s (%s) is not in api/openapi.yaml", r[0], r[1], path)
		}
	}
}

// Real answers, good and bad, must match their documented schemas.
func TestOpenAPI_ResponsesMatchSchemas(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "/" {
		t.Fatalf("servers = %v, want the one relative server /", doc.Servers)
	}
	// The one server is relative ("/", the server that serves the
	// document), which the router cannot match against a host: route on
	// the paths alone.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	srv := newFullHTTPServer(t)
	const admin = "admin-token-0001"
	for _, tc := range []struct {
		method, path, token, body, accept string
	}{
		{"GET", "/id/order", "", "", ""},
		{"GET", "/id/order?count=3", "", "", ""},
		{"GET", "/id/order?count=3", "", "", "text/plain"},
		{"GET", "/id/order?count=0", "", "", ""},
		{"GET", "/id/bad%20tag", "", "", ""},
		{"GET", "/segment/order", "", "", ""},
		{"GET", "/snowflake/order", "", "", ""},
		{"GET", "/healthz", "", "", ""},
		{"GET", "/api/segment/get/order", "", "", ""},
		{"GET", "/api/segment/get/bad%20tag", "", "", ""},
		{"GET", "/decodeSnowflakeId?snowflakeId=6575691263741136896", "", "", ""},
		{"GET", "/decodeSnowflakeId?snowflakeId=x", "", "", ""},
		{"GET", "/tinyid/id/nextIdSimple?bizType=order&batchSize=3", "", "", ""},
		{"GET", "/tinyid/id/nextId?bizType=order&batchSize=2", "", "", ""},
		{"GET", "/tinyid/id/nextId?bizType=order&batchSize=0", "", "", ""},
		{"POST", "/tinyid/id/nextIdSimple?bizType=order", "", "", ""},
		{"POST", "/tinyid/id/nextSegmentIdSimple?bizType=order", "", "", ""},
		{"GET", "/tinyid/id/nextSegmentIdSimple?bizType=bad%20tag", "", "", ""},
		{"GET", "/tinyid/id/nextSegmentId?bizType=order", "", "", ""},
		{"POST", "/tinyid/id/nextSegmentId?bizType=bad%20tag", "", "", ""},
		{"GET", "/readyz", "", "", ""},
		{"GET", "/metrics", "", "", ""},
		{"GET", "/admin/tags", admin, "", ""},
		{"GET", "/admin/tags", "", "", ""},
		{"GET", "/admin/tags", "wrong", "", ""},
		{"POST", "/admin/tags", admin, `{"tag":"invoice","step":100,"start":5}`, ""},
		{"POST", "/admin/tags", admin, `{"tag":"invoice"}`, ""},
		{"PATCH", "/admin/tags/invoice", admin, `{"step":200}`, ""},
		{"PATCH", "/admin/tags/nosuch", admin, `{"step":200}`, ""},
		{"GET", "/admin/segments", admin, "", ""},
		{"GET", "/id/order?format=prefixed", "", "", ""},
		{"GET", "/id/order?format=nope", "", "", ""},
		{"GET", "/id/decode/order_BukQL3x", "", "", ""},
		{"GET", "/id/decode/order_BukQL3y", "", "", ""},
		{"GET", "/snowflake/decode/123456789012", "", "", ""},
		{"GET", "/snowflake/decode/x", "", "", ""},
		{"POST", "/segment/order/range?size=100", "", "", ""},
		{"POST", "/segment/order/range?size=0", "", "", ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()

			// Route on the documented server-relative path.
			rreq, _ := http.NewRequest(tc.method, "http://localhost"+tc.path, nil)
			route, params, err := router.FindRoute(rreq)
			if err != nil {
				t.Fatalf("not in the document: %v", err)
			}
			in := &openapi3filter.ResponseValidationInput{
				RequestValidationInput: &openapi3filter.RequestValidationInput{Request: rreq, PathParams: params, Route: route},
				Status:                 resp.StatusCode,
				Header:                 resp.Header,
				Body:                   io.NopCloser(bytes.NewReader(body)),
				Options:                &openapi3filter.Options{IncludeResponseStatus: true},
			}
			if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
				t.Fatalf("%d %s does not match the document: %v", resp.StatusCode, body, err)
			}
		})
	}
}

// Generators and linters need every operation named and its security
// stated, [] where the route is open; the CI lint (Redocly) checks the
// rest of the document.
func TestOpenAPI_EveryOperationHasIDAndSecurity(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	seen := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", where)
			} else if prev, dup := seen[op.OperationID]; dup {
				t.Errorf("%s and %s share operationId %s", prev, where, op.OperationID)
			}
			seen[op.OperationID] = where
			if op.Security == nil {
				t.Errorf("%s states no security (use [] for an open route)", where)
			}
		}
	}
}
