package segment_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"maps"
	"sync"
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

// releases records what a ReleaseObserver is told.
type releases struct {
	segmenttest.RegressionCounter // the Observer methods
	mu                            sync.Mutex
	byTag                         map[string]int64 // tag/shutdown or tag/range
}

func (r *releases) SegmentReleased(tag string, ids int64, shutdown bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := tag + "/range"
	if shutdown {
		key = tag + "/shutdown"
	}
	r.byTag[key] += ids
}

// The ReleaseObserver hears of each hand-back the store accepted, by
// Shutdown and by ReleaseRange, and of no refused one: the sums are the
// shutdown line's, and those of the ranges the store took back.
func TestAllocator_ReleaseObserver(t *testing.T) {
	ctx := t.Context()
	st := segmenttest.NewMemory()
	obs := &releases{byTag: map[string]int64{}}
	a, err := segment.New(st, segment.Options{AutoCreate: true, DefaultStep: 100, FixedStep: true, PrefetchRatio: 0.5, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	other, err := segment.New(st, segment.Options{AutoCreate: true, DefaultStep: 100, FixedStep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, tag := range []string{"a", "b"} {
		if _, err := a.Next(ctx, tag); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Next(ctx, "b"); err != nil { // b's hand-back is refused
		t.Fatal(err)
	}
	r1, err := a.ReserveRange(ctx, "c", 100)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := a.ReleaseRange(ctx, "c", r1.Start+30, r1.End); err != nil || !ok {
		t.Fatalf("release [%d,%d): %v %v", r1.Start+30, r1.End, ok, err)
	}
	if ok, err := a.ReleaseRange(ctx, "c", r1.Start+30, r1.End); err != nil || ok {
		t.Fatalf("second release: %v %v, want refused", ok, err)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"a/shutdown": 99, "c/range": 70}
	if !maps.Equal(obs.byTag, want) {
		t.Fatalf("told %v, want %v", obs.byTag, want)
	}
}
