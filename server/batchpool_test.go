package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idgen/idgen/segment"
	"github.com/idgen/idgen/server"
)

// Batch answers share buffers between requests (Server.bodies): many
// batches of different tags, sizes and formats at once over real HTTP
// each get exactly their own answer, its Content-Length, its tag and its
// count, and no ID twice across them all.
func TestServer_PooledBatchAnswersDoNotMix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	for _, tag := range []string{"alpha", "bravo"} {
		if err := st.CreateTag(ctx, segment.Tag{Name: tag, MaxID: 1, Step: 5000}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := server.New(server.Config{Segment: newAllocator(t, st, segment.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)

	type ask struct {
		tag, format string
		n           int
	}
	asks := []ask{{"alpha", "", 300}, {"bravo", "", 2000}, {"alpha", "prefixed", 1000}, {"bravo", "", 257}, {"alpha", "", 5}}
	var mu sync.Mutex
	seen := map[string]map[string]bool{"alpha": {}, "bravo": {}}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 15 {
				a := asks[(w+i)%len(asks)]
				url := fmt.Sprintf("%s/id/%s?count=%d", ts.URL, a.tag, a.n)
				if a.format != "" {
					url += "&format=" + a.format
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len(body)) {
					t.Errorf("%s: %d, Content-Length %d for %d bytes, %v", url, resp.StatusCode, resp.ContentLength, len(body), err)
					return
				}
				var r struct {
					Tag string
					IDs []string
				}
				if err := json.Unmarshal(body, &r); err != nil || r.Tag != a.tag || len(r.IDs) != a.n {
					t.Errorf("%s: tag %q, %d IDs, %v; want %s, %d", url, r.Tag, len(r.IDs), err, a.tag, a.n)
					return
				}
				mu.Lock()
				for _, id := range r.IDs {
					if a.format == "prefixed" {
						if !strings.HasPrefix(id, a.tag+"_") {
							t.Errorf("%s: ID %q is not of %s", url, id, a.tag)
						}
					} else if _, err := strconv.ParseInt(id, 10, 64); err != nil {
						t.Errorf("%s: ID %q is not a decimal", url, id)
					}
					if seen[a.tag][id] {
						t.Errorf("%s: ID %s of %s handed out twice", url, id, a.tag)
					}
					seen[a.tag][id] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
