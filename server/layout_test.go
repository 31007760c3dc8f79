package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFileLines keeps server/ in pieces one can read whole: a file past it
// holds more than one concern (issue 43).
const maxFileLines = 400

func TestLayout_FilesStaySmall(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
			t.Errorf("%s has %d lines, more than %d: split it by concern", f, n, maxFileLines)
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d production files; the glob ran in the wrong directory", checked)
	}
}
