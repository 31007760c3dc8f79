package segment_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

// lockedBuffer is a log sink safe for the allocator's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An auto-created tag that differs from an existing one only in case
// starts its own counter, as documented, and the process that created it
// says so once in its log.
func TestAllocator_WarnsOfCaseTwinOnce(t *testing.T) {
	ctx := context.Background()
	st := segmenttest.NewMemory()
	if err := st.CreateTag(ctx, segment.Tag{Name: "order", MaxID: 1000, Step: 10}); err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	alloc, err := segment.New(st, segment.Options{AutoCreate: true, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Close()
	const warning = "differs from an existing one only in case"
	for _, tc := range []struct {
		tag      string
		first    int64
		warnings int
	}{
		{"order", 1000, 0},
		{"Order", 1, 1},
		{"Order", 2, 1}, // once per tag
		{"ORDER", 1, 2},
		{"invoice", 1, 2},
	} {
		id, err := alloc.Next(ctx, tc.tag)
		if err != nil || id != tc.first {
			t.Fatalf("Next(%q) = %d, %v; want %d", tc.tag, id, err, tc.first)
		}
		if n := strings.Count(log.String(), warning); n != tc.warnings {
			t.Fatalf("after Next(%q): %d warnings, want %d; log:\n%s", tc.tag, n, tc.warnings, log.String())
		}
	}
	if !strings.Contains(log.String(), "tag=ORDER existing=") {
		t.Fatalf("the warning names neither tag:\n%s", log.String())
	}
}
