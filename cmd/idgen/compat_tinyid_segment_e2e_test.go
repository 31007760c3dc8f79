package main_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/segment/segmenttest"
)

// do is one HTTP exchange, with header given as name, value pairs.
func do(t *testing.T, p *proctest.Proc, method, path string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, p.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		// What Java's HttpURLConnection sends with an empty form.
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

// tinyidSegment is a segment as tinyid's client reads it from
// nextSegmentIdSimple: five comma-separated numbers.
type tinyidSegment struct{ current, loading, max, delta, remainder int64 }

func parseTinyidSegment(t *testing.T, body string) tinyidSegment {
	t.Helper()
	f := strings.Split(body, ",")
	if len(f) != 5 {
		t.Fatalf("segment %q: %d fields, want 5", body, len(f))
	}
	var n [5]int64
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("segment %q: field %d: %v", body, i, err)
		}
		n[i] = v
	}
	return tinyidSegment{n[0], n[1], n[2], n[3], n[4]}
}

// ids are the IDs tinyid's client issues from the segment: from the
// first number above current that is remainder modulo delta, every
// delta, up to max. (With current itself aligned, tinyid's client
// starts at current+delta, which is the same number here.)
func (s tinyidSegment) ids() []int64 {
	first := s.current + 1
	for first%s.delta != s.remainder {
		first++
	}
	var out []int64
	for id := first; id <= s.max; id += s.delta {
		out = append(out, id)
	}
	return out
}

// tinyid's segment routes over real HTTP: the bytes tinyid's server
// answers, by POST as tinyid's Java client sends it and by GET, and
// segments that no other route of idgen hands out again.
func TestServe_TinyidSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	p := proctest.Serve(t, bin, nil, "--store", "sqlite://"+filepath.Join(dir, "seg.db"),
		"--compat", "tinyid", "--default-step", "100", "--snowflake=false")

	// A new tag starts at 1 with step 100: tinyid's client issues
	// (currentId, maxId], and fetches the next segment from loadingId on,
	// 20% in.
	for _, tt := range []struct {
		method, path string
		want         answer
	}{
		{"POST", "/tinyid/id/nextSegmentIdSimple?token=t0&bizType=seg", answer{200, textPlain, "0,20,100,1,0"}},
		{"GET", "/tinyid/id/nextSegmentIdSimple?bizType=seg", answer{200, textPlain, "100,120,200,1,0"}},
		{"GET", "/tinyid/id/nextSegmentId?bizType=seg", answer{200, "application/json",
			`{"data":{"maxId":300,"loadingId":220,"currentId":200,"delta":1,"remainder":0},"code":200,"message":""}`}},
		{"POST", "/tinyid/id/nextSegmentId?bizType=seg", answer{200, "application/json",
			`{"data":{"maxId":400,"loadingId":320,"currentId":300,"delta":1,"remainder":0},"code":200,"message":""}`}},
		// tinyid's other routes by POST too, as its controller takes any method.
		{"POST", "/tinyid/id/nextIdSimple?bizType=other", answer{200, textPlain, "1"}},
		{"POST", "/tinyid/id/nextId?bizType=other&batchSize=2", answer{200, "application/json", `{"data":[2,3],"code":200,"message":""}`}},
	} {
		if got := do(t, p, tt.method, tt.path); got != tt.want {
			t.Errorf("%s %s = %+v, want %+v", tt.method, tt.path, got, tt.want)
		}
	}

	// Segments fetched as tinyid's clients do, while idgen hands out the
	// same tag's IDs by every other route: no ID twice.
	var mu sync.Mutex
	issued := make([]int64, 0, 40_000)
	for id := int64(1); id <= 400; id++ { // the four segments above
		issued = append(issued, id)
	}
	add := func(ids ...int64) {
		mu.Lock()
		issued = append(issued, ids...)
		mu.Unlock()
	}
	routes := []func() []int64{
		func() []int64 {
			a := do(t, p, "POST", "/tinyid/id/nextSegmentIdSimple?bizType=seg")
			if a.status != 200 {
				t.Errorf("nextSegmentIdSimple = %+v", a)
				return nil
			}
			return parseTinyidSegment(t, a.body).ids()
		},
		func() []int64 {
			a := do(t, p, "GET", "/tinyid/id/nextSegmentId?bizType=seg")
			var r struct {
				Data struct{ MaxID, LoadingID, CurrentID, Delta, Remainder int64 }
				Code int
			}
			if err := json.Unmarshal([]byte(a.body), &r); a.status != 200 || err != nil || r.Code != 200 {
				t.Errorf("nextSegmentId = %+v, %v", a, err)
				return nil
			}
			d := r.Data
			return tinyidSegment{d.CurrentID, d.LoadingID, d.MaxID, d.Delta, d.Remainder}.ids()
		},
		func() []int64 {
			return splitIDs(t, do(t, p, "GET", "/tinyid/id/nextIdSimple?bizType=seg&batchSize=37"))
		},
		func() []int64 {
			a := do(t, p, "GET", "/segment/seg?count=29")
			var r struct{ IDs []string }
			if err := json.Unmarshal([]byte(a.body), &r); a.status != 200 || err != nil {
				t.Errorf("/segment/seg = %+v, %v", a, err)
				return nil
			}
			var out []int64
			for _, s := range r.IDs {
				id, _ := strconv.ParseInt(s, 10, 64)
				out = append(out, id)
			}
			return out
		},
		func() []int64 {
			a := do(t, p, "POST", "/segment/seg/range?size=50")
			var r struct{ Start, End string }
			if err := json.Unmarshal([]byte(a.body), &r); a.status != 200 || err != nil {
				t.Errorf("/segment/seg/range = %+v, %v", a, err)
				return nil
			}
			start, _ := strconv.ParseInt(r.Start, 10, 64)
			end, _ := strconv.ParseInt(r.End, 10, 64)
			var out []int64
			for id := start; id < end; id++ {
				out = append(out, id)
			}
			return out
		},
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 25 {
				add(routes[(w+i)%len(routes)]()...)
			}
		})
	}
	wg.Wait()
	if d := segmenttest.Duplicates(issued); d != 0 {
		t.Fatalf("%d IDs issued twice among %d from tinyid's segments and idgen's routes", d, len(issued))
	}
	t.Logf("%d IDs from tinyid segments, nextIdSimple, /segment and /segment/range of one tag: 0 duplicates", len(issued))

	// Errors: idgen's status, a line of text or tinyid's Response with
	// code 6, never an empty 200.
	for _, tt := range []struct {
		method, path string
		status       int
		prefix       string
	}{
		{"POST", "/tinyid/id/nextSegmentIdSimple?bizType=bad%20tag", 400, "invalid_tag: "},
		{"POST", "/tinyid/id/nextSegmentIdSimple", 400, "invalid_tag: "},
		{"GET", "/tinyid/id/nextSegmentId?bizType=bad%20tag", 400, `{"data":null,"code":6,"message":"invalid_tag: `},
		{"PUT", "/tinyid/id/nextSegmentId?bizType=seg", 405, ""},
	} {
		got := do(t, p, tt.method, tt.path)
		if got.status != tt.status || !strings.HasPrefix(got.body, tt.prefix) {
			t.Errorf("%s %s = %+v, want %d starting %q", tt.method, tt.path, got, tt.status, tt.prefix)
		}
	}
}

func splitIDs(t *testing.T, a answer) []int64 {
	t.Helper()
	if a.status != 200 {
		t.Errorf("nextIdSimple = %+v", a)
		return nil
	}
	var out []int64
	for _, s := range strings.Split(a.body, ",") {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Errorf("nextIdSimple %q: %v", a.body, err)
		}
		out = append(out, id)
	}
	return out
}

// The segment routes take tinyid's token parameter, limited to its tags.
func TestServe_TinyidSegmentsAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	p := proctest.Serve(t, bin, nil, "--store", "sqlite://"+filepath.Join(dir, "segauth.db"),
		"--compat", "tinyid", "--snowflake=false", "--api-tokens", "0f673adf80504e2e=pay")
	for _, tt := range []struct {
		method, path string
		status       int
		prefix       string
	}{
		{"POST", "/tinyid/id/nextSegmentIdSimple?token=0f673adf80504e2e&bizType=pay", 200, "0,200,1000,1,0"},
		{"GET", "/tinyid/id/nextSegmentId?token=0f673adf80504e2e&bizType=pay", 200, `{"data":{"maxId":2000,`},
		{"POST", "/tinyid/id/nextSegmentIdSimple?token=wrong-token&bizType=pay", 403, "forbidden: "},
		{"POST", "/tinyid/id/nextSegmentIdSimple?token=0f673adf80504e2e&bizType=orders", 403, "forbidden: "},
		{"POST", "/tinyid/id/nextSegmentIdSimple?bizType=pay", 401, "unauthorized: "},
		{"GET", "/tinyid/id/nextSegmentId?bizType=pay&token=wrong-token", 403, `{"data":null,"code":5,"message":"forbidden: `},
	} {
		if got := do(t, p, tt.method, tt.path); got.status != tt.status || !strings.HasPrefix(got.body, tt.prefix) {
			t.Errorf("%s %s = %+v, want %d starting %q", tt.method, tt.path, got, tt.status, tt.prefix)
		}
	}
}
