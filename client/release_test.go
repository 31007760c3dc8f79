package client_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

// Close hands the unused rest back: runs that each take one ID and close,
// over HTTP and over gRPC, get 1, 2, 3… of a fresh tag, not one ID per
// burnt range; and the IDs of clients running at once stay unique while
// they hand back.
func TestClient_SegmentCloseHandsBack(t *testing.T) {
	t.Parallel()
	ts := startServer(t, filepath.Join(t.TempDir(), "idgen.db"), server.Config{})
	for _, tc := range []struct {
		name string
		opts []client.Option
	}{
		{"HTTP", nil},
		{"gRPC", []client.Option{client.WithGRPC()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(ts.URL, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			tag := "handback-" + strings.ToLower(tc.name)
			// The hand-back is what is tested, not its 2 s default bound,
			// which a loaded -race run can outlast.
			opts := segment.Options{ReleaseTimeout: 30 * time.Second}
			for want := int64(1); want <= 3; want++ {
				alloc, err := c.Segment(opts)
				if err != nil {
					t.Fatal(err)
				}
				id, err := alloc.Next(t.Context(), tag)
				if err != nil {
					t.Fatal(err)
				}
				if err := alloc.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				if id != want {
					t.Fatalf("run %d got ID %d, want %d: the range was not handed back", want, id, want)
				}
			}

			// Concurrent clients, each closing after a few IDs: a hand-back
			// must never give out an ID another client holds.
			var mu sync.Mutex
			seen := map[int64]bool{}
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for range 5 {
						alloc, err := c.Segment(opts)
						if err != nil {
							t.Error(err)
							return
						}
						for range 7 {
							id, err := alloc.Next(t.Context(), tag)
							if err != nil {
								t.Error(err)
								break
							}
							mu.Lock()
							if seen[id] {
								t.Errorf("ID %d handed out twice", id)
							}
							seen[id] = true
							mu.Unlock()
						}
						if err := alloc.Close(); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// The release route takes a range back only with its token, only for its
// tag, only once, and only while nobody reserved past it.
func TestServer_ReleaseRange(t *testing.T) {
	t.Parallel()
	ts := startServer(t, filepath.Join(t.TempDir(), "idgen.db"), server.Config{})
	post := func(path, body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(ts.URL+path, "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: %s", path, b)
		}
		return resp.StatusCode, out
	}
	code := func(out map[string]any) string {
		e, _ := out["error"].(map[string]any)
		c, _ := e["code"].(string)
		return c
	}
	release := func(tag, tok, from string) (int, map[string]any) {
		return post("/segment/"+tag+"/range/release", `{"release_token":"`+tok+`","from":"`+from+`"}`)
	}
	st, r := post("/segment/r/range?size=10", "")
	tok, _ := r["release_token"].(string)
	if st != 200 || r["start"] != "1" || r["end"] != "1001" || len(tok) != 32 {
		t.Fatalf("reserve: %d %v", st, r)
	}
	if st, out := release("other", tok, "5"); st != 409 || code(out) != "range_not_released" {
		t.Fatalf("another tag's release: %d %v", st, out)
	}
	if st, out := release("r", "nope", "5"); st != 409 || code(out) != "range_not_released" {
		t.Fatalf("unknown token: %d %v", st, out)
	}
	if st, out := post("/segment/r/range/release", `{"from":"5"}`); st != 400 || code(out) != "invalid_release" {
		t.Fatalf("no token: %d %v", st, out)
	}
	if st, out := release("r", tok, "5"); st != 200 || out["released"] != true || out["end"] != "1001" {
		t.Fatalf("release: %d %v", st, out)
	}
	if st, out := release("r", tok, "5"); st != 409 || code(out) != "range_not_released" {
		t.Fatalf("second release: %d %v", st, out)
	}
	// The next range starts where the hand-back left off.
	st, r2 := post("/segment/r/range?size=10", "")
	if st != 200 || r2["start"] != "5" {
		t.Fatalf("reserve after release: %d %v", st, r2)
	}
	// Someone reserves past it: the earlier range cannot go back, and its
	// token is spent.
	tok2, _ := r2["release_token"].(string)
	if st, r3 := post("/segment/r/range?size=10", ""); st != 200 || r3["start"] != r2["end"] {
		t.Fatalf("third reserve: %d %v", st, r3)
	}
	if st, out := release("r", tok2, "6"); st != 409 || code(out) != "range_not_released" {
		t.Fatalf("release under a later range: %d %v", st, out)
	}
	// from outside the range.
	_, r4 := post("/segment/r/range?size=10", "")
	tok4, _ := r4["release_token"].(string)
	if st, out := release("r", tok4, "1"); st != 400 || code(out) != "invalid_release" {
		t.Fatalf("from below the range: %d %v", st, out)
	}
}
