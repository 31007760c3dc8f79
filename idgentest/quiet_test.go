package idgentest_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/idgen/idgen/idgentest"
)

// A user's go test -v shows no [GIN-debug] lines from NewServer, yet a
// user who asks gin for its route listing (GIN_MODE=debug) gets it. The
// test runs itself in a child process, so that gin's mode is what a
// fresh test binary has, whatever this process did to it.
func TestNewServer_NoGinDebugOutput(t *testing.T) {
	t.Parallel()
	if os.Getenv("IDGENTEST_CHILD") == "1" {
		srv := idgentest.NewServer(t, nil)
		if _, err := srv.Client().Next(context.Background(), "order"); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, tc := range []struct {
		ginMode   string // "" leaves GIN_MODE unset
		wantDebug bool
	}{
		{"", false},
		{"debug", true},
	} {
		t.Run("GIN_MODE="+tc.ginMode, func(t *testing.T) {
			env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GIN_MODE=") })
			env = append(env, "IDGENTEST_CHILD=1")
			if tc.ginMode != "" {
				env = append(env, "GIN_MODE="+tc.ginMode)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestNewServer_NoGinDebugOutput$", "-test.v", "-test.count=1")
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestNewServer_NoGinDebugOutput") {
				t.Fatalf("child test: %v\n%s", err, out)
			}
			var debug []string
			for line := range strings.Lines(string(out)) {
				if strings.Contains(line, "[GIN-debug]") {
					debug = append(debug, line)
				}
			}
			switch {
			case !tc.wantDebug && len(debug) > 0:
				t.Errorf("go test -v shows %d [GIN-debug] lines, want none:\n%s", len(debug), strings.Join(debug, ""))
			case tc.wantDebug && !slices.ContainsFunc(debug, func(l string) bool { return strings.Contains(l, "/id/:tag") }):
				t.Errorf("GIN_MODE=debug: no route listing in the output:\n%s", out)
			}
		})
	}
}
