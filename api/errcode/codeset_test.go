package errcode

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// grpcOnly are codes only the gRPC API answers; httpOnly those of HTTP
// routes gRPC has no counterpart of.
var (
	grpcOnly = []string{"invalid_mode"}
	httpOnly = []string{
		"invalid_step", "invalid_description", "invalid_body", "tag_exists", "opaque_fixed", "tag_not_opaque",
		"admin_disabled", "admin_unavailable", // the admin API
		"invalid_lock_token",                                          // gRPC's tokens are int64, never text
		"ui_disabled", "not_ready", "not_found", "method_not_allowed", // /ui, /readyz, the router
	}
)

// The codes a caller can get are one set wherever they are listed: this
// package's (which the server answers from, beside the codes the server
// detects itself, each of which its source names), the API document's
// closed enum (and so the generated client's), docs/operations.md's
// table, and docs/grpc.md's, less the codes of the other API.
func TestCodeSet_SameEverywhere(t *testing.T) {
	all := Names()
	without := func(drop []string) []string {
		return slices.DeleteFunc(slices.Clone(all), func(c string) bool { return slices.Contains(drop, c) })
	}

	var doc struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Error struct {
							Properties struct {
								Code struct {
									Enum []string `yaml:"enum"`
								} `yaml:"code"`
							} `yaml:"properties"`
						} `yaml:"error"`
					} `yaml:"properties"`
				} `yaml:"Error"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(read(t, "../openapi.yaml"), &doc); err != nil {
		t.Fatal(err)
	}
	same(t, "api/openapi.yaml's Error code enum", doc.Components.Schemas.Error.Properties.Error.Properties.Code.Enum, without(grpcOnly))
	same(t, "api/apiclient's ErrorErrorCode values", submatches(read(t, "../apiclient/apiclient.gen.go"), `(?m)^\t\w+\s+ErrorErrorCode = "(\w+)"$`), without(grpcOnly))
	same(t, "docs/operations.md's error table", tableCodes(t, "../../docs/operations.md", "| status | codes |"), without(grpcOnly))
	same(t, "docs/grpc.md's error table", tableCodes(t, "../../docs/grpc.md", "| idgen code | HTTP | gRPC |"), without(httpOnly))

	// Every code the server writes in its own errors is one of the set,
	// and every code the set says the server detects is in its source.
	var src []byte
	files, _ := filepath.Glob("../../server/*.go")
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			src = append(src, read(t, f)...)
		}
	}
	written := submatches(src, `apiError\{[^,{}]+,\s*"(\w+)"`)
	if len(written) < 10 {
		t.Fatalf("found %d codes in server/*.go's apiError literals: the pattern no longer matches the source", len(written))
	}
	for _, c := range written {
		if !slices.Contains(all, c) {
			t.Errorf("server/ answers code %q, which api/errcode does not list (add it to detected)", c)
		}
	}
	for _, c := range detected {
		if !strings.Contains(string(src), `"`+c+`"`) {
			t.Errorf("api/errcode lists %q as detected by the server, but no server/*.go file names it", c)
		}
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// submatches returns the first group of every match of pattern in b.
func submatches(b []byte, pattern string) []string {
	var out []string
	for _, m := range regexp.MustCompile(pattern).FindAllSubmatch(b, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// tableCodes returns the `codes` in the first column of the Markdown
// table under header, or in the second for operations.md's status table,
// outside parentheses.
func tableCodes(t *testing.T, path, header string) []string {
	t.Helper()
	text := string(read(t, path))
	_, table, ok := strings.Cut(text, header+"\n")
	if !ok {
		t.Fatalf("%s: no table %q", path, header)
	}
	col := 1
	if strings.HasPrefix(header, "| status") {
		col = 2
	}
	var codes []string
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) > col {
			// What parentheses say about a code is no code.
			cell := regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(cells[col], "")
			codes = append(codes, submatches([]byte(cell), "`([a-z_]+)`")...)
		}
	}
	return codes
}

// same fails unless got, as a set, is want.
func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	got = slices.Compact(slices.Sorted(slices.Values(got)))
	for _, c := range want {
		if !slices.Contains(got, c) {
			t.Errorf("%s lacks %q", what, c)
		}
	}
	for _, c := range got {
		if !slices.Contains(want, c) {
			t.Errorf("%s has %q, which is not an idgen code here", what, c)
		}
	}
}
