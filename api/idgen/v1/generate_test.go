package idgenv1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buf runs the buf pinned in api/tools/go.mod in api/, as go generate
// does.
func buf(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "-modfile=tools/go.mod", "buf"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("buf %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The committed code is what the pinned generators make of the .proto
// file today: an edit without go generate fails here.
func TestGenerated_UpToDate(t *testing.T) {
	out := t.TempDir()
	buf(t, "generate", "--output", out)
	for _, f := range []string{"idgen.pb.go", "idgenv1connect/idgen.connect.go"} {
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
	buf(t, "lint")
	if diff := buf(t, "format", "--diff"); diff != "" {
		t.Fatalf("buf format would change the .proto file:\n%s", diff)
	}
}
