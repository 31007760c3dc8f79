package main_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
)

// answer is one HTTP exchange, byte for byte where it matters.
type answer struct {
	status int
	ctype  string
	body   string
}

func get(t *testing.T, p *proctest.Proc, path string, header ...string) answer {
	t.Helper()
	return do(t, p, http.MethodGet, path, header...)
}

const textPlain = "text/plain; charset=utf-8"

// Leaf's and tinyid's routes over real HTTP from a real process: the
// answers their callers parse, byte for byte, and idgen's errors where
// they would have given -1, an empty 200 or a 500.
func TestServe_CompatRoutes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	env := []string{"TZ=UTC"}
	p := proctest.Serve(t, bin, env, "--store", "sqlite://"+filepath.Join(dir, "open.db"),
		"--compat", "leaf,tinyid", "--snowflake-layout", "leaf", "--worker-id", "39", "--max-batch", "5")

	exact := []struct {
		path string
		want answer
	}{
		{"/api/segment/get/orders", answer{200, textPlain, "1"}},
		{"/api/segment/get/orders", answer{200, textPlain, "2"}},
		{"/tinyid/id/nextIdSimple?bizType=pay", answer{200, textPlain, "1"}},
		{"/tinyid/id/nextIdSimple?bizType=pay&batchSize=3", answer{200, textPlain, "2,3,4"}},
		{"/tinyid/id/nextId?bizType=pay&batchSize=2", answer{200, "application/json", `{"data":[5,6],"code":200,"message":""}`}},
		{"/tinyid/id/nextId?bizType=pay", answer{200, "application/json", `{"data":[7],"code":200,"message":""}`}},
		// tinyid caps a batch at its maximum rather than refusing it.
		{"/tinyid/id/nextIdSimple?bizType=pay&batchSize=9", answer{200, textPlain, "8,9,10,11,12"}},
		// Leaf's own example, 1567733700834 ms on worker 39, sequence 3448.
		{"/decodeSnowflakeId?snowflakeId=" + strconv.FormatInt((1567733700834-1288834974657)<<22|39<<12|3448, 10),
			answer{200, "application/json", `{"workerId":"39","sequenceId":"3448","timestamp":"1567733700834(2019-09-06 01:35:00.834)"}`}},
	}
	for _, tt := range exact {
		if got := get(t, p, tt.path); got != tt.want {
			t.Errorf("GET %s = %+v, want %+v", tt.path, got, tt.want)
		}
	}

	// The snowflake route: bare digits that Leaf's formula decodes to now,
	// worker 39.
	before := time.Now().UnixMilli()
	a := get(t, p, "/api/snowflake/get/orders")
	after := time.Now().UnixMilli()
	id, err := strconv.ParseInt(a.body, 10, 64)
	if a.status != 200 || a.ctype != textPlain || err != nil {
		t.Fatalf("GET /api/snowflake/get/orders = %+v", a)
	}
	if ms, w := (id>>22)+1288834974657, (id>>12)^(id>>22<<10); ms < before || ms > after || w != 39 {
		t.Errorf("snowflake ID %d decodes with Leaf's formula to %d ms on worker %d; want %d..%d on 39", id, ms, w, before, after)
	}
	ms := (id >> 22) + 1288834974657
	wantDecode := fmt.Sprintf(`{"workerId":"39","sequenceId":"%d","timestamp":"%d(%s)"}`, id&4095, ms, time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000"))
	if got := get(t, p, "/decodeSnowflakeId?snowflakeId="+a.body); got.body != wantDecode {
		t.Errorf("decode of %d = %q, want %q", id, got.body, wantDecode)
	}
	if got := get(t, p, "/snowflake/decode/"+a.body); !strings.Contains(got.body, fmt.Sprintf(`"unix_ms":%d`, ms)) {
		t.Errorf("/snowflake/decode/%d = %q, want unix_ms %d in the leaf layout", id, got.body, ms)
	}

	// idgen decode takes the same layout flags, and the environment.
	leafExample := strconv.FormatInt((1567733700834-1288834974657)<<22|39<<12|3448, 10)
	for _, args := range [][]string{{"--snowflake-layout", "leaf"}, {"--snowflake-layout", "41/10/12", "--snowflake-epoch", "2010-11-04T01:42:54.657Z"}} {
		out, err := exec.Command(bin, append([]string{"decode", leafExample}, args...)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"unix_ms":1567733700834`) || !strings.Contains(string(out), `"worker_id":39`) {
			t.Errorf("idgen decode %s %v = %s %v, want 1567733700834 ms on worker 39", leafExample, args, out, err)
		}
	}
	cmd := exec.Command(bin, "decode", leafExample)
	cmd.Env = append(os.Environ(), "IDGEN_SNOWFLAKE_LAYOUT=twitter")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), `"unix_ms":1567733700834`) {
		t.Errorf("IDGEN_SNOWFLAKE_LAYOUT=twitter idgen decode = %s %v", out, err)
	}

	// Errors: idgen's status and a plain-text line saying what to do,
	// never an ID of -1 or an empty 200.
	errs := []struct {
		path   string
		status int
		says   string
	}{
		{"/api/segment/get/bad%20tag", 400, `invalid_tag: invalid tag: use 1 to 64`},
		{"/api/segment/get/" + strings.Repeat("k", 65), 400, "65 bytes, more than 64"},
		{"/api/segment/get/a!b", 400, `byte 2 of "a!b" is '!'`},
		{"/decodeSnowflakeId?snowflakeId=abc", 400, "invalid_id: snowflakeId must be"},
		{"/decodeSnowflakeId", 400, "invalid_id"},
		{"/tinyid/id/nextIdSimple?bizType=pay&batchSize=0", 400, "invalid_count"},
		{"/tinyid/id/nextIdSimple?batchSize=2", 400, "the tag is empty"},
	}
	for _, tt := range errs {
		got := get(t, p, tt.path)
		if got.status != tt.status || got.ctype != textPlain || !strings.Contains(got.body, tt.says) || !strings.HasSuffix(got.body, "\n") {
			t.Errorf("GET %s = %+v, want %d text saying %q", tt.path, got, tt.status, tt.says)
		}
	}
	got := get(t, p, "/tinyid/id/nextId?bizType=pay&batchSize=x")
	if got.status != 400 || !strings.HasPrefix(got.body, `{"data":null,"code":6,"message":"invalid_count: `) {
		t.Errorf("nextId with a bad batchSize = %+v, want 400 in tinyid's shape with code 6", got)
	}

	// The same metrics as idgen's own routes.
	m := get(t, p, "/metrics").body
	for _, want := range []string{`route="/api/segment/get/:tag"`, `route="/tinyid/id/nextId"`, `idgen_ids_issued_total{mode="segment",tag="pay"} 12`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The compat routes take the client tokens: Leaf's as a bearer token,
// tinyid's as its token parameter, each limited to its tags.
func TestServe_CompatRoutesAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	p := proctest.Serve(t, bin, nil, "--store", "sqlite://"+filepath.Join(dir, "auth.db"),
		"--compat", "leaf,tinyid", "--snowflake=false", "--api-tokens", "0f673adf80504e2e=pay;leaf-client-token-1=orders")

	for _, tt := range []struct {
		path   string
		header []string
		want   answer
	}{
		{"/tinyid/id/nextIdSimple?bizType=pay&token=0f673adf80504e2e", nil, answer{200, textPlain, "1"}},
		{"/tinyid/id/nextId?bizType=pay&token=0f673adf80504e2e&batchSize=2", nil, answer{200, "application/json", `{"data":[2,3],"code":200,"message":""}`}},
		{"/api/segment/get/orders", []string{"Authorization", "Bearer leaf-client-token-1"}, answer{200, textPlain, "1"}},
	} {
		if got := get(t, p, tt.path, tt.header...); got != tt.want {
			t.Errorf("GET %s = %+v, want %+v", tt.path, got, tt.want)
		}
	}
	for _, tt := range []struct {
		path   string
		header []string
		status int
		prefix string
	}{
		{"/tinyid/id/nextIdSimple?bizType=pay&token=wrong-token", nil, 403, "forbidden: "},
		{"/tinyid/id/nextIdSimple?bizType=orders&token=0f673adf80504e2e", nil, 403, "forbidden: "},
		{"/tinyid/id/nextIdSimple?bizType=pay", nil, 401, "unauthorized: "},
		{"/tinyid/id/nextId?bizType=pay&token=wrong-token", nil, 403, `{"data":null,"code":5,"message":"forbidden: `},
		{"/api/segment/get/orders", nil, 401, "unauthorized: "},
		{"/api/segment/get/pay", []string{"Authorization", "Bearer leaf-client-token-1"}, 403, "forbidden: "},
		{"/api/snowflake/get/orders", []string{"Authorization", "Bearer leaf-client-token-1"}, 404, "mode_disabled: "},
	} {
		if got := get(t, p, tt.path, tt.header...); got.status != tt.status || !strings.HasPrefix(got.body, tt.prefix) {
			t.Errorf("GET %s = %+v, want %d starting %q", tt.path, got, tt.status, tt.prefix)
		}
	}
}

// --worker-range confines the leased worker IDs of real processes that
// share a store, as idgen beside Leaf's servers needs.
func TestServe_WorkerRange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	env := []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "range.db"), "IDGEN_WORKER_RANGE=700-701"}
	seen := map[string]bool{}
	for range 2 {
		p := proctest.Serve(t, bin, env, "--snowflake-layout", "leaf")
		m := get(t, p, "/metrics").body
		for _, w := range []string{"idgen_worker_id 700", "idgen_worker_id 701"} {
			if strings.Contains(m, w) {
				seen[w] = true
			}
		}
		a := get(t, p, "/snowflake/orders", "Accept", "text/plain")
		id, err := strconv.ParseInt(a.body, 10, 64)
		if w := (id >> 12) & 1023; err != nil || (w != 700 && w != 701) {
			t.Errorf("snowflake ID %q is from worker %d, want 700 or 701", a.body, w)
		}
	}
	if len(seen) != 2 {
		t.Errorf("two processes with --worker-range 700-701 hold %v, want both 700 and 701", seen)
	}
	out, err := exec.Command(bin, "serve", "--worker-range", "700-1024", "--snowflake-layout", "leaf").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "worker IDs end at 1023") {
		t.Errorf("serve --worker-range 700-1024 = %v %s, want a refusal naming the layout's last worker ID", err, out)
	}
}
