package idgen_test

import (
	"bytes"
	"context"
	"fmt"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
)

// TestDocSnippets takes every ```go block of the README, CONTRIBUTING.md
// and docs/*.md from the Markdown text itself and treats it as a user
// who pastes it would: a file of its own module that requires
// github.com/idgen/idgen (replaced by this checkout). Each must be gofmt
// clean and pass go vet, which compiles it, so a snippet that drifts from
// the API fails here. Then each runs:
//   - package main: built and run in an empty directory; one that opens
//     sqlite://./idgen.db must leave the database and no -wal or -shm file
//     (the store was closed). One that talks to http://localhost:8080 runs
//     against a real idgen serve, with that address replaced by the
//     server's.
//   - a _test package: go test; one that starts the idgen image runs with
//     the image under test in place of idgen:local, and needs Docker.
func TestDocSnippets(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{"README.md", "CONTRIBUTING.md"}, docs...)
	modFile, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(modFile)
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var total int
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range goBlocks(string(text)) {
			total++
			t.Run(fmt.Sprintf("%s:%d", doc, s.line), func(t *testing.T) {
				t.Parallel()
				checkSnippet(t, root, string(goLine), s.code)
			})
		}
	}
	if total < 4 {
		t.Fatalf("found %d Go snippets, want at least the README's two and docs/testing.md's two", total)
	}
}

type snippet struct {
	line int // of the ```go fence
	code string
}

// goBlocks returns the fenced ```go blocks of a Markdown text.
func goBlocks(md string) []snippet {
	var out []snippet
	var cur *snippet
	var b strings.Builder
	for i, line := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &snippet{line: i + 1}
			b.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.code = b.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			b.WriteString(line + "\n")
		}
	}
	return out
}

func checkSnippet(t *testing.T, root, goLine, code string) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "snippet.go", code, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("not a Go file as pasted: %v\n%s", err, code)
	}
	if formatted, err := format.Source([]byte(code)); err != nil || string(formatted) != code {
		t.Errorf("not gofmt clean (err %v); gofmt gives:\n%s", err, formatted)
	}
	pkg := f.Name.Name
	var imports []string
	for _, spec := range f.Imports {
		p, _ := strconv.Unquote(spec.Path.Value)
		imports = append(imports, p)
	}
	isTest := strings.HasSuffix(pkg, "_test")
	if pkg != "main" && !isTest {
		t.Fatalf("package %s: a snippet is a program (package main) or a test (package x_test)", pkg)
	}

	if testing.Short() {
		t.Skip("parsed and gofmt-checked; compiling and running it as a module of its own (a minute or more each, cold) is skipped under -short")
	}

	dir := t.TempDir()
	name := "main.go"
	if isTest {
		name = "snippet_test.go"
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	mod := fmt.Sprintf("module example.com/snippet\n\n%s\n\nrequire github.com/idgen/idgen v0.0.0\n\nreplace github.com/idgen/idgen => %s\n", goLine, root)
	writeFile(t, filepath.Join(dir, "go.mod"), mod)
	writeFile(t, filepath.Join(dir, "go.sum"), string(sum))
	writeFile(t, filepath.Join(dir, name), code)
	// -mod=mod adds the requirements the snippet imports directly, from
	// this checkout's module graph, as `go mod tidy` would for a user.
	// Modules resolve the way the user's go resolves them (their GOPROXY,
	// GOMODCACHE and GONOSUMDB), never from what an earlier run left in
	// the cache: with an empty cache the graph is downloaded, as it is on
	// a new machine.
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	goCmd(t, dir, env, "vet", ".")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := code
	has := func(p string) bool { return strings.Contains(strings.Join(imports, "\n"), p) }
	switch {
	case isTest:
		if has("github.com/idgen/idgen/idgencontainer") {
			run = strings.ReplaceAll(run, `"idgen:local"`, strconv.Quote(proctest.Image(t)))
		}
		writeFile(t, filepath.Join(dir, name), run)
		out := goCmd(t, dir, env, "test", "-count=1", "-v", ".")
		if !strings.Contains(out, "--- PASS") {
			t.Fatalf("go test ran no test:\n%s", out)
		}
	default:
		if strings.Contains(code, "http://localhost:8080") {
			bin := proctest.Binary(t, t.TempDir())
			srv := proctest.Serve(t, bin, nil, "--store", "sqlite://"+filepath.Join(t.TempDir(), "idgen.db"))
			run = strings.ReplaceAll(run, "http://localhost:8080", srv.URL)
			writeFile(t, filepath.Join(dir, name), run)
		}
		goCmd(t, dir, env, "build", "-o", "snippet", ".")
		work := t.TempDir()
		runOnce := func() []byte {
			cmd := exec.CommandContext(ctx, filepath.Join(dir, "snippet"))
			cmd.Dir = work
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the program failed: %v\n%s", err, out)
			}
			t.Logf("output: %s", bytes.TrimSpace(out))
			return out
		}
		out := runOnce()
		// A remote client that says it hands back the rest of its range
		// must: a second run against the same server, in a tag nobody
		// else uses, gets the next ID, not one past a burnt range.
		if strings.Contains(code, "http://localhost:8080") && strings.Contains(code, "hands the unused rest back to the server") {
			if first, second := string(bytes.TrimSpace(out)), string(bytes.TrimSpace(runOnce())); first != "1" || second != "2" {
				t.Errorf("two runs printed %s then %s, want 1 then 2: the rest of the range did not go back", first, second)
			}
		}
		if strings.Contains(code, "sqlite://./idgen.db") {
			left, err := os.ReadDir(work)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range left {
				names = append(names, e.Name())
			}
			// idgen.db.fence is the fence's sidecar (store/sqlite), state
			// that must outlive the program like the database.
			if got := strings.Join(names, " "); got != "idgen.db" && got != "idgen.db idgen.db.fence" {
				t.Errorf("the program left %v in its directory, want only idgen.db and its fence sidecar (an unclosed store leaves -wal and -shm)", names)
			}
		}
	}
}

func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
