package proctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/idgen/idgen/store/dbtest"
)

// Image returns the idgen container image under test: IDGEN_TEST_IMAGE,
// else idgen:ci, built from this checkout by .ci/compose-image.sh when it
// is missing (CI builds it before the tests). Without Docker the test
// skips, or fails under CI, as dbtest.RequireDocker decides.
func Image(t testing.TB) string {
	t.Helper()
	dbtest.RequireDocker(t)
	if img := os.Getenv("IDGEN_TEST_IMAGE"); img != "" {
		return img
	}
	const img = "idgen:ci"
	if exec.Command("docker", "image", "inspect", img).Run() == nil {
		return img
	}
	_, file, _, _ := runtime.Caller(0)
	build := exec.Command("bash", filepath.Join(filepath.Dir(file), "..", "..", ".ci", "compose-image.sh"), img)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s with .ci/compose-image.sh: %v\n%s", img, err, out)
	}
	return img
}
