package idgenv1_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// buf runs the buf pinned in api/tools/go.mod in api/, as go generate
// does: `go tool buf`, or the binary IDGEN_BUF names, which must report
// the pinned version. Built from source, buf is minutes of CPU on a new
// machine; CI installs the release binary of the same version
// (.ci/run) and names it here.
func buf(t *testing.T, args ...string) string {
	t.Helper()
	name := os.Getenv("IDGEN_BUF")
	if name != "" {
		checkBufVersion(t, name)
	} else {
		var err error
		if name, err = goToolBuf(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("buf %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// goToolBuf is the path of the binary `go tool buf` runs, built once or
// found in the build cache (go tool -n prints it): each `go tool` loads
// api/tools' module graph again, most of a second of CPU, where a buf
// check takes a tenth of that.
var goToolBuf = sync.OnceValues(func() (string, error) {
	cmd := exec.Command("go", "tool", "-modfile=tools/go.mod", "-n", "buf")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("go tool -n buf: %v\n%s", err, ee.Stderr)
		}
		return "", fmt.Errorf("go tool -n buf: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
})

// checkBufVersion fails t unless bin is the buf api/tools/go.mod pins.
func checkBufVersion(t *testing.T, bin string) {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join("..", "..", "tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var pin string
	for line := range strings.Lines(string(mod)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/bufbuild/buf" {
			pin = strings.TrimPrefix(f[1], "v")
		}
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("IDGEN_BUF=%s: %v", bin, err)
	}
	if have := strings.TrimSpace(string(out)); pin == "" || have != pin {
		t.Fatalf("IDGEN_BUF=%s is buf %s; api/tools/go.mod pins %q: unset IDGEN_BUF or install that version", bin, have, pin)
	}
}

// The committed code is what the pinned generators make of the .proto
// file today: an edit without go generate fails here.
func TestGenerated_UpToDate(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	buf(t, "generate", "--output", out)
	for _, f := range []string{"idgen.pb.go", "idgen_grpc.pb.go", "idgenv1connect/idgen.connect.go"} {
		want, err := os.ReadFile(filepath.Join(out, "idgen", "v1", f))
		if err != nil {
			t.Fatal(err)
		}
		have, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, want) {
			t.Errorf("api/idgen/v1/%s is stale: run go generate ./api/idgen/v1", f)
		}
	}
}

// buf lint with the STANDARD rules (api/buf.yaml), and buf format: the
// .proto file is as buf would write it.
func TestProto_LintAndFormat(t *testing.T) {
	t.Parallel()
	buf(t, "lint")
	if diff := buf(t, "format", "--diff"); diff != "" {
		t.Fatalf("buf format would change the .proto file:\n%s", diff)
	}
}
