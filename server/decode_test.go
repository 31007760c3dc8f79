package server_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/server"
	"github.com/idgen/idgen/snowflake"
)

func TestServer_ReadableIDs(t *testing.T) {
	t.Parallel()
	ts := newServer(t, server.Config{})
	a := get(t, "GET", ts.URL+"/id/order?format=prefixed", nil)
	var one struct{ Tag, ID string }
	if err := json.Unmarshal([]byte(a.body), &one); err != nil || a.status != 200 || !strings.HasPrefix(one.ID, "order_") {
		t.Fatalf("prefixed ID: %d %s", a.status, a.body)
	}
	d := get(t, "GET", ts.URL+"/id/decode/"+one.ID, nil)
	if d.status != 200 || d.body != `{"id":"1001","tag":"order"}`+"\n" {
		t.Fatalf("decode %s: %d %s, want tag order id 1001", one.ID, d.status, d.body)
	}
	batch := get(t, "GET", ts.URL+"/id/order?format=prefixed&count=2", map[string]string{"Accept": "text/plain"})
	lines := strings.Split(strings.TrimSpace(batch.body), "\n")
	if batch.status != 200 || len(lines) != 2 || !strings.HasPrefix(lines[1], "order_") {
		t.Fatalf("prefixed text batch: %d %q", batch.status, batch.body)
	}
	// A typo: swap the last two characters (always different check chars or
	// digits), or change one.
	id := []byte(one.ID)
	id[len(id)-1] ^= 0x01
	for _, tc := range []struct{ path, code string }{
		{"/id/decode/" + string(id), "invalid_id"},
		{"/id/decode/order", "invalid_id"},
		{"/id/decode/order_0OIl", "invalid_id"},
		{"/id/order?format=hex", "invalid_format"},
		{"/id/order?format=prefixed&format=numeric", "invalid_format"},
	} {
		a := get(t, "GET", ts.URL+tc.path, nil)
		if a.status != 400 || !strings.Contains(a.body, `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want 400 %s", tc.path, a.status, a.body, tc.code)
		}
	}
}

func TestServer_DecodeSnowflake(t *testing.T) {
	t.Parallel()
	ts := newServer(t, server.Config{})
	when := time.Date(2026, 11, 29, 12, 0, 0, 123e6, time.UTC)
	id, err := snowflake.Layout{}.Encode(snowflake.Parts{Time: when, WorkerID: 7, Sequence: 42})
	if err != nil {
		t.Fatal(err)
	}
	a := get(t, "GET", ts.URL+"/snowflake/decode/"+strconv.FormatInt(id, 10), nil)
	var p struct {
		ID       string `json:"id"`
		Time     string `json:"time"`
		UnixMS   int64  `json:"unix_ms"`
		WorkerID int64  `json:"worker_id"`
		Sequence int64  `json:"sequence"`
	}
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.status != 200 {
		t.Fatalf("decode: %d %s", a.status, a.body)
	}
	if p.Time != "2026-11-29T12:00:00.123Z" || p.UnixMS != when.UnixMilli() || p.WorkerID != 7 || p.Sequence != 42 || p.ID != strconv.FormatInt(id, 10) {
		t.Fatalf("decoded %+v", p)
	}
	for _, bad := range []string{"abc", "-5", "99999999999999999999", "1.5"} {
		if a := get(t, "GET", ts.URL+"/snowflake/decode/"+bad, nil); a.status != 400 || !strings.Contains(a.body, "invalid_id") {
			t.Errorf("decode %q: %d %s, want 400 invalid_id", bad, a.status, a.body)
		}
	}
}

func TestServer_ReserveRange(t *testing.T) {
	t.Parallel()
	ts := newFullHTTPServer(t)
	var ranges [][2]int64
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/segment/order/range?size=100", 200, ""},
		{"/segment/order/range?size=3000", 200, ""},
		{"/segment/order/range?size=0", 400, "invalid_size"},
		{"/segment/order/range?size=5001", 200, ""}, // clamped to MaxRange
		{"/segment/order/range", 400, "invalid_size"},
		{"/segment/order/range?size=1&size=2", 400, "invalid_size"},
		{"/segment/bad%20tag/range?size=5", 400, "invalid_tag"},
	} {
		a := get(t, "POST", ts.URL+tc.path, nil)
		if a.status != tc.status {
			t.Fatalf("%s: %d %s", tc.path, a.status, a.body)
		}
		if tc.code != "" {
			if c := errCode(t, a.body); c != tc.code {
				t.Fatalf("%s: code %s, want %s", tc.path, c, tc.code)
			}
			continue
		}
		var r struct{ Tag, Start, End string }
		if err := json.Unmarshal([]byte(a.body), &r); err != nil {
			t.Fatal(err)
		}
		s, _ := strconv.ParseInt(r.Start, 10, 64)
		e, _ := strconv.ParseInt(r.End, 10, 64)
		ranges = append(ranges, [2]int64{s, e})
	}
	// The tag was auto-created with step 1000: the first range is raised to
	// the step, the second is as asked, the third clamped to MaxRange
	// (5000), and they do not overlap.
	if ranges[0] != [2]int64{1, 1001} || ranges[1] != [2]int64{1001, 4001} || ranges[2] != [2]int64{4001, 9001} {
		t.Fatalf("ranges %v, want [1,1001), [1001,4001) and [4001,9001)", ranges)
	}
}
