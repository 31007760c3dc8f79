package segment_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/segment/segmenttest"
)

// Shutdown says what it handed back: the tags, the IDs, each tag's count.
func TestAllocator_Shutdown_LogsHandBack(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	a, err := segment.New(segmenttest.NewMemory(), segment.Options{AutoCreate: true, DefaultStep: 100, FixedStep: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"a", "b"} {
		if _, err := a.Next(t.Context(), tag); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Msg   string
		Tags  int              `json:"tags"`
		IDs   int64            `json:"ids"`
		ByTag map[string]int64 `json:"by_tag"`
	}
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if err := json.Unmarshal(line, &rec); err == nil && rec.Msg == "segment: handed back the unused rest of the ranges" {
			break
		}
		rec.Msg = ""
	}
	// Each tag holds [1,101) with 1 taken, and may have loaded the next
	// segment too: at least 99 IDs each go back.
	if rec.Msg == "" || rec.Tags != 2 || rec.ByTag["a"] < 99 || rec.ByTag["b"] < 99 || rec.IDs != rec.ByTag["a"]+rec.ByTag["b"] {
		t.Fatalf("hand-back line %+v in:\n%s", rec, buf.String())
	}
}
