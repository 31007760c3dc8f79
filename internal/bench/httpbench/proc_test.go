package httpbench

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// buildFloor builds cmd/floor of this module into dir.
func buildFloor(t testing.TB, dir string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(dir, "floor")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/floor")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/floor: %v\n%s", err, out)
	}
	return bin
}
