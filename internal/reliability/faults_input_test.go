package reliability_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/store/dbtest"
)

// badCase is one malformed or hostile request, sent byte for byte as
// written, so that no client library cleans it up first.
type badCase struct {
	name    string
	method  string // default GET
	target  string // the request target, as sent
	headers string // extra header lines, each ending in \r\n
	body    string
	raw     string // the whole request instead of the fields above
	want    int    // the status wanted; 0 means any 4xx
	code    string // the error code wanted, if any
	ok200   bool   // 200 is acceptable too: odd but valid input
	mode    string // with ok200: the ID space of the IDs returned
	tag     string // with ok200 and mode segment: the tag
}

func badCases() []badCase {
	long := func(n int) string { return strings.Repeat("a", n) }
	return []badCase{
		// Tags: 1 to 64 characters of [A-Za-z0-9_.:-].
		{name: "tag of 65 characters", target: "/segment/" + long(65), want: 400, code: "invalid_tag"},
		{name: "tag of 4 KiB", target: "/segment/" + long(4096), want: 400, code: "invalid_tag"},
		{name: "tag of 60 KiB on /snowflake", target: "/snowflake/" + long(60000), want: 400, code: "invalid_tag"},
		{name: "unicode, escaped", target: "/segment/%E6%97%A5%E6%9C%AC", want: 400, code: "invalid_tag"},
		{name: "unicode, raw UTF-8 bytes", target: "/segment/日本"},
		{name: "emoji", target: "/snowflake/%F0%9F%92%A5", want: 400, code: "invalid_tag"},
		{name: "right-to-left override", target: "/segment/abc%E2%80%AEdef", want: 400, code: "invalid_tag"},
		{name: "fullwidth letter", target: "/segment/%EF%BD%81", want: 400, code: "invalid_tag"},
		{name: "zero-width space", target: "/segment/a%E2%80%8Bb", want: 400, code: "invalid_tag"},
		{name: "invalid UTF-8", target: "/segment/%FF%FE", want: 400, code: "invalid_tag"},
		{name: "NUL byte, escaped", target: "/segment/a%00b", want: 400, code: "invalid_tag"},
		{name: "CRLF and a header, escaped", target: "/segment/a%0D%0ASet-Cookie:%20x=1", want: 400, code: "invalid_tag"},
		{name: "SQL quote", target: "/segment/a%27%20OR%20%271%27%3D%271", want: 400, code: "invalid_tag"},
		{name: "SQL statement", target: "/segment/x%27%3BDROP%20TABLE%20id_sequence%3B--", want: 400, code: "invalid_tag"},
		{name: "SQL on /snowflake", target: "/snowflake/1%3BSELECT%20pg_sleep(10)", want: 400, code: "invalid_tag"},
		{name: "SQL on /id", target: "/id/x%22%20OR%201=1", want: 400, code: "invalid_tag"},
		{name: "SQL LIKE wildcards", target: "/segment/x%25_", want: 400, code: "invalid_tag"},
		{name: "backslash", target: "/segment/x%5C", want: 400, code: "invalid_tag"},
		{name: "SQL comment in the tag alphabet", target: "/segment/x--", ok200: true, mode: "segment", tag: "x--"},
		// Paths.
		{name: "traversal to /admin", target: "/segment/../admin/tags"},
		{name: "encoded traversal to /admin", target: "/segment/..%2Fadmin%2Ftags"},
		{name: "double-encoded traversal", target: "/segment/%252e%252e%252fadmin"},
		{name: "traversal to /etc/passwd", target: "/segment/..%2F..%2F..%2Fetc%2Fpasswd"},
		{name: "backslash traversal", target: "/segment/..%5C..%5Cadmin"},
		{name: "traversal inside /admin", target: "/admin/../admin/tags"},
		{name: "double slash", target: "//segment/x"},
		{name: "no tag", target: "/segment/"},
		{name: "dot-dot as the tag", target: "/segment/..", ok200: true, mode: "segment", tag: ".."},
		{name: "absolute-form target", target: "http://other.example/segment/abs", ok200: true, mode: "segment", tag: "abs"},
		{name: "invalid percent-encoding", target: "/segment/%zz", want: 400},
		// count.
		{name: "count above max batch", target: "/segment/input?count=10001", want: 400, code: "invalid_count"},
		{name: "huge count", target: "/segment/input?count=99999999999999999999", want: 400, code: "invalid_count"},
		{name: "count past int64", target: "/snowflake/input?count=9223372036854775808", want: 400, code: "invalid_count"},
		{name: "negative count", target: "/segment/input?count=-1", want: 400, code: "invalid_count"},
		{name: "negative count on /snowflake", target: "/snowflake/input?count=-5", want: 400, code: "invalid_count"},
		{name: "count -0", target: "/segment/input?count=-0", want: 400, code: "invalid_count"},
		{name: "count of min int64", target: "/segment/input?count=-9223372036854775808", want: 400, code: "invalid_count"},
		{name: "count zero", target: "/snowflake/input?count=0", want: 400, code: "invalid_count"},
		{name: "fractional count", target: "/segment/input?count=1.5", want: 400, code: "invalid_count"},
		{name: "count in exponent form", target: "/segment/input?count=1e3", want: 400, code: "invalid_count"},
		{name: "count in hex", target: "/segment/input?count=0x10", want: 400, code: "invalid_count"},
		{name: "empty count", target: "/segment/input?count=", want: 400, code: "invalid_count"},
		{name: "count with a space", target: "/segment/input?count=%205", want: 400, code: "invalid_count"},
		{name: "count with a plus sign", target: "/segment/input?count=%2B5", ok200: true, mode: "segment", tag: "input"},
		{name: "repeated count", target: "/segment/input?count=1&count=2", want: 400, code: "invalid_count"},
		{name: "repeated count on /snowflake", target: "/snowflake/input?count=3&count=3", want: 400, code: "invalid_count"},
		{name: "repeated format", target: "/segment/input?format=numeric&format=prefixed", want: 400, code: "invalid_format"},
		{name: "unknown format", target: "/segment/input?format=%27", want: 400, code: "invalid_format"},
		{name: "semicolon in the query", target: "/snowflake/input?count=2;count=3", ok200: true, mode: "snowflake"},
		{name: "count as an array", target: "/snowflake/input?count[]=7", ok200: true, mode: "snowflake"},
		{name: "1 MiB query", target: "/segment/input?count=1&pad=" + long(1<<20), want: 431},
		// Ranges and decoding.
		{name: "negative range size", method: "POST", target: "/segment/input/range?size=-1", want: 400, code: "invalid_size"},
		{name: "range size above max, clamped to it", method: "POST", target: "/segment/input/range?size=1000001", want: 200},
		{name: "repeated range size", method: "POST", target: "/segment/input/range?size=1&size=2", want: 400, code: "invalid_size"},
		{name: "decode a negative ID", target: "/snowflake/decode/-1", want: 400, code: "invalid_id"},
		{name: "decode past int64", target: "/snowflake/decode/99999999999999999999", want: 400, code: "invalid_id"},
		{name: "decode SQL", target: "/snowflake/decode/1%20OR%201=1", want: 400, code: "invalid_id"},
		{name: "decode a NUL readable ID", target: "/id/decode/%00%00", want: 400, code: "invalid_id"},
		{name: "decode a 5 KiB readable ID", target: "/id/decode/x_" + long(5000), want: 400, code: "invalid_id"},
		// Methods, auth and bodies.
		{name: "DELETE", method: "DELETE", target: "/segment/input", want: 405},
		{name: "TRACE", method: "TRACE", target: "/segment/input", want: 405},
		{name: "unknown method", method: "BREW", target: "/segment/input", want: 405},
		{name: "admin without a token", target: "/admin/tags", want: 401, code: "unauthorized"},
		{name: "admin with a wrong token", target: "/admin/tags", headers: "Authorization: Bearer wrong\r\n", want: 403, code: "forbidden"},
		{name: "admin with an 8 KiB token", target: "/admin/segments", headers: "Authorization: Bearer " + long(8192) + "\r\n", want: 403, code: "forbidden"},
		{name: "admin with a SQL token", target: "/admin/tags", headers: "Authorization: Bearer ' OR '1'='1\r\n", want: 403, code: "forbidden"},
		{name: "admin body of 1 MiB", method: "POST", target: "/admin/tags",
			headers: "Authorization: Bearer " + adminToken + "\r\nContent-Type: application/json\r\n",
			body:    `{"tag":"` + long(1<<20) + `"}`, want: 400, code: "invalid_body"},
		{name: "admin body with a bad tag", method: "POST", target: "/admin/tags",
			headers: "Authorization: Bearer " + adminToken + "\r\nContent-Type: application/json\r\n",
			body:    `{"tag":"x'; DROP TABLE id_sequence;--","step":10}`, want: 400, code: "invalid_tag"},
		{name: "admin body with a negative step", method: "POST", target: "/admin/tags",
			headers: "Authorization: Bearer " + adminToken + "\r\nContent-Type: application/json\r\n",
			body:    `{"tag":"neg-step","step":-5}`, want: 400},
		// Headers and HTTP framing.
		{name: "one header of 100 KiB", target: "/segment/input", headers: "X-Big: " + long(100<<10) + "\r\n", want: 431},
		{name: "3000 headers", target: "/segment/input", headers: strings.Repeat("X-Many: 0123456789012345678901234567890123456789\r\n", 3000), want: 431},
		{name: "HTTP/1.1 without Host", raw: "GET /segment/input HTTP/1.1\r\n\r\n", want: 400},
		{name: "garbage request line", raw: "HELLO\r\n\r\n", want: 400},
		{name: "no HTTP version", raw: "GET /segment/input\r\n\r\n", want: 400},
		{name: "negative Content-Length", method: "POST", target: "/segment/input/range?size=1", headers: "Content-Length: -1\r\n", want: 400},
		{name: "odd Accept", target: "/snowflake/input", headers: "Accept: text/plain;q=abc, */*;q=\r\n", ok200: true, mode: "snowflake"},
	}
}

// Malformed, hostile and slow requests against a real serve. Every one
// gets a 4xx answer (or, for odd but valid input, IDs), never a 5xx; slow
// connections are closed by the server; and the service stays up and
// correct: IDs issued before and after are unique and no junk reached the
// database.
func faultInput(t *testing.T, prof profile) {
	srv := dbtest.StartContainer(t, dbtest.Postgres)
	f := newFleet(t, srv.DSN, 1, leaseTTL)
	inst := f.start(0)
	addr := strings.TrimPrefix(inst.url, "http://")
	seg := map[string][]int64{}
	var sf []int64
	collect := func(when string) {
		t.Helper()
		for _, mode := range []string{"segment", "snowflake"} {
			ids, status, code, _, err := fetchIDs(f, inst, "/"+mode+"/input?count=1000")
			if err != nil || status != http.StatusOK {
				t.Fatalf("%s: %s IDs: %d %s %v", when, mode, status, code, err)
			}
			if mode == "segment" {
				seg["input"] = append(seg["input"], ids...)
			} else {
				sf = append(sf, ids...)
			}
		}
	}
	collect("before")
	base, err := f.sample(inst, "before")
	if err != nil {
		t.Fatal(err)
	}

	answers := map[string]int{}
	for _, c := range badCases() {
		status, hdr, body, err := rawRequest(addr, c.request(), 20*time.Second)
		if err != nil {
			t.Errorf("%s: no answer: %v", c.name, err)
			answers["no answer"]++
			continue
		}
		key := statusKey(status, []byte(body))
		switch {
		case status == http.StatusOK:
			key = "200 IDs (odd but valid input)"
		case !strings.HasPrefix(body, "{"):
			key = strconv.Itoa(status) + " (net/http)" // answered before the handler, without a JSON body
		}
		answers[key]++
		switch {
		case status >= 500:
			t.Errorf("%s: %d %s; a bad request must never get a 5xx", c.name, status, trim(body))
		case status == http.StatusOK && c.ok200:
			ids, err := parseIDs([]byte(body))
			if err != nil {
				t.Errorf("%s: 200 with body %q: %v", c.name, trim(body), err)
			}
			if c.mode == "segment" {
				seg[c.tag] = append(seg[c.tag], ids...)
			} else {
				sf = append(sf, ids...)
			}
		case c.want != 0 && status != c.want:
			t.Errorf("%s: %d %s; want %d", c.name, status, trim(body), c.want)
		case c.want == 0 && (status < 400 || status > 499):
			t.Errorf("%s: %d %s; want a 4xx", c.name, status, trim(body))
		case c.code != "" && !strings.Contains(key, " "+c.code):
			t.Errorf("%s: %s; want the code %s", c.name, key, c.code)
		}
		if hdr.Get("Set-Cookie") != "" {
			t.Errorf("%s: the answer carries Set-Cookie %q: a header was injected", c.name, hdr.Get("Set-Cookie"))
		}
	}
	t.Logf("%d malformed requests answered: %s", len(badCases()), formatErrors(answers))

	// Slow clients: half send nothing, half trickle a request's headers
	// a byte every 700 ms; ReadHeaderTimeout (5 s) must close all of them,
	// while normal requests keep being served.
	closed, held := slowloris(t, addr, prof.slowloris)
	during, err := f.sample(inst, "slowloris")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if st, body, _, err := f.get(inst, "/snowflake/input"); err != nil || st != http.StatusOK {
			t.Errorf("normal request %d during the slow connections: %d %s %v", i, st, trim(body), err)
		}
	}
	var longest time.Duration
	for i := range prof.slowloris {
		d := <-closed
		if d < 0 {
			t.Errorf("slow connection %d: still open after 20 s; the server must close it after its 5 s ReadHeaderTimeout", i)
			continue
		}
		longest = max(longest, d)
	}
	held()
	answers["slow connection closed by the server"] = prof.slowloris
	t.Logf("%d slow connections closed by the server, the last after %v; goroutines %.0f before, %.0f with them open",
		prof.slowloris, longest.Round(time.Millisecond), base.goroutines, during.goroutines)

	// Still up and correct.
	collect("after")
	if st, _, _, err := f.get(inst, "/healthz"); err != nil || st != http.StatusOK {
		t.Errorf("/healthz after the bad input: %d %v", st, err)
	}
	var dups int
	for tag, ids := range seg {
		if n := duplicates(ids); n > 0 {
			t.Errorf("tag %s: %d duplicate segment IDs", tag, n)
			dups += n
		}
	}
	if n := duplicates(sf); n > 0 {
		t.Errorf("%d duplicate snowflake IDs", n)
		dups += n
	}
	var after runtimeSample
	// The server closes the slow connections' goroutines asynchronously.
	testtime.Until(10*time.Second, 100*time.Millisecond, func() bool {
		after, err = f.sample(inst, "after")
		return err == nil && after.goroutines <= base.goroutines+10
	})
	if after.goroutines > base.goroutines+10 {
		t.Errorf("goroutines: %.0f before the bad input, %.0f after", base.goroutines, after.goroutines)
	}
	rows, err := f.db.db.QueryContext(context.Background(), `SELECT biz_tag FROM id_sequence`)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for rows.Next() {
		var tag string
		if err := rows.Scan(&tag); err != nil {
			t.Fatal(err)
		}
		tags = append(tags, tag)
		if !idgen.ValidTag(tag) {
			t.Errorf("id_sequence holds the invalid tag %q", tag)
		}
	}
	rows.Close()
	log := inst.p.Log()
	for _, bad := range []string{"panic", "unexpected error"} {
		if strings.Contains(log, bad) {
			t.Errorf("the server logged %q:\n%s", bad, tail(log, 30))
		}
	}
	var nseg int
	for _, ids := range seg {
		nseg += len(ids)
	}
	t.Logf("tags in the database: %v; IDs %d segment, %d snowflake, %d duplicates; goroutines %.0f before, %.0f after",
		tags, nseg, len(sf), dups, base.goroutines, after.goroutines)
	f.stopAll()
	record(t, result{test: "TestFaults", scenario: "input", load: 0,
		faults:  fmt.Sprintf("%d malformed requests, %d slow connections", len(badCases()), prof.slowloris),
		segment: nseg, snowflake: len(sf), duplicates: dups, errors: answers,
		notes: []string{
			fmt.Sprintf("%d slow connections (half silent, half a header byte every 700 ms) all closed by the server, the last after %v; 20 normal requests served meanwhile; goroutines %.0f before, %.0f with them open, %.0f after",
				prof.slowloris, longest.Round(time.Millisecond), base.goroutines, during.goroutines, after.goroutines),
			fmt.Sprintf("tags in the database afterwards: %q — every one valid; odd but valid tags such as \"..\" are accepted", tags),
		}})
}

// request renders the case as bytes on the wire.
func (c badCase) request() string {
	if c.raw != "" {
		return c.raw
	}
	method := c.method
	if method == "" {
		method = "GET"
	}
	h := c.headers
	if c.body != "" {
		h += "Content-Length: " + strconv.Itoa(len(c.body)) + "\r\n"
	}
	if !strings.Contains(h, "Accept:") {
		h += "Accept: text/plain\r\n"
	}
	return method + " " + c.target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + h + "\r\n" + c.body
}

// rawRequest writes req to addr as is and reads one response. It writes
// from a goroutine, so that a server answering before it has read the
// whole request (431) is heard.
func rawRequest(addr, req string, timeout time.Duration) (int, http.Header, string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, nil, "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	go func() { _, _ = io.WriteString(conn, req) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b), nil
}

// slowloris opens n connections that never finish their request: half
// send nothing, half a byte every 700 ms. Each reports on closed how long
// the server kept it open, or -1 if it was still open after 20 s. The
// returned func waits for the writers to stop.
func slowloris(t *testing.T, addr string, n int) (<-chan time.Duration, func()) {
	t.Helper()
	closed := make(chan time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		t0 := time.Now()
		done := make(chan struct{})
		wg.Go(func() {
			defer conn.Close()
			_ = conn.SetReadDeadline(t0.Add(20 * time.Second))
			_, err := io.Copy(io.Discard, conn) // until the server closes it
			close(done)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				closed <- -1
				return
			}
			closed <- time.Since(t0)
		})
		if i%2 == 1 {
			wg.Go(func() {
				req := "GET /segment/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + strings.Repeat("a", 100)
				for j := 0; j < len(req); j++ {
					if _, err := conn.Write([]byte{req[j]}); err != nil {
						return
					}
					select {
					case <-done:
						return
					case <-time.After(700 * time.Millisecond):
					}
				}
			})
		}
	}
	return closed, wg.Wait
}

func trim(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
