package main_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/readable"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/dbtest"
)

const (
	opaqueKeyA = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	opaqueKeyB = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
	e2eAdmin   = "admin-token-for-the-e2e-test"
	e2eMetrics = "metrics-token-for-the-e2e-test"
)

func send(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func errorCode(body string) string {
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error.Code
}

// Two real instances with one key share a PostgreSQL database and serve
// an opaque tag through every route that hands out segment IDs: no ID
// twice, none in counter order, each decoding to a distinct counter. An
// instance with another key, or none, refuses the tag rather than guess;
// a tag never switches; its ranges are refused.
func TestServe_OpaqueTagOnASharedDatabase(t *testing.T) {
	t.Parallel()
	srv := dbtest.Start(t, dbtest.Postgres)
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	keyFile := filepath.Join(dir, "opaque.key")
	if err := os.WriteFile(keyFile, []byte(opaqueKeyA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"IDGEN_STORE=" + srv.DSN, "IDGEN_ADMIN_TOKEN=" + e2eAdmin, "IDGEN_METRICS_TOKEN=" + e2eMetrics}
	a := proctest.Serve(t, bin, env, "--opaque-key-file", keyFile, "--default-step", "20")
	b := proctest.Serve(t, bin, append(env, "IDGEN_OPAQUE_KEY="+opaqueKeyA), "--default-step", "20")
	key, err := opaque.ParseKey(opaqueKeyA)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.Log(), "opaque_key="+key.Fingerprint()) || strings.Contains(a.Log(), opaqueKeyA) {
		t.Fatalf("startup line must name the key's fingerprint and never the key:\n%s", a.Log())
	}

	tag, plain := segmenttest.UniqueTag("opq"), segmenttest.UniqueTag("plain")
	if st, body := send(t, "POST", a.URL+"/admin/tags", e2eAdmin, `{"tag":"`+tag+`","step":20,"opaque":true}`); st != 201 || !strings.Contains(body, `"opaque":true`) {
		t.Fatalf("create opaque tag: %d %s", st, body)
	}

	var mu sync.Mutex
	var ids []int64
	var wg sync.WaitGroup
	paths := []string{"/id/" + tag, "/segment/" + tag + "?count=7", "/id/" + tag + "?format=prefixed"}
	for i, p := range []*proctest.Proc{a, b, a, b} {
		wg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second}
			for n := range 150 {
				path := paths[(i+n)%len(paths)]
				st, body, err := p.Get(context.Background(), client, path)
				if err != nil || st != 200 {
					t.Errorf("GET %s: %d %s %v", path, st, body, err)
					return
				}
				var r struct {
					ID  string
					IDs []string
				}
				if err := json.Unmarshal([]byte(body), &r); err != nil {
					t.Error(err)
					return
				}
				got := r.IDs
				if r.ID != "" {
					got = []string{r.ID}
				}
				mu.Lock()
				for _, s := range got {
					ids = append(ids, parseAnyID(t, s))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	seen, counters := map[int64]bool{}, map[int64]bool{}
	descents := 0
	for i, id := range ids {
		if id < 1 || seen[id] {
			t.Fatalf("ID %d handed out twice or not positive", id)
		}
		seen[id] = true
		c, err := key.Decode(tag, id)
		if err != nil || counters[c] {
			t.Fatalf("ID %d decodes to counter %d (%v), already seen", id, c, err)
		}
		counters[c] = true
		if i > 0 && id < ids[i-1] {
			descents++
		}
	}
	t.Logf("%d opaque IDs from two instances: 0 duplicates, %d descents in arrival order", len(ids), descents)
	if len(ids) < 1000 || descents < len(ids)/4 {
		t.Fatalf("%d IDs with %d descents: opaque IDs should be in no order", len(ids), descents)
	}

	// The admin route decodes with the key.
	st, body := send(t, "GET", b.URL+"/admin/opaque/"+tag+"/"+strconv.FormatInt(ids[0], 10), e2eAdmin, "")
	want, _ := key.Decode(tag, ids[0])
	if st != 200 || !strings.Contains(body, `"counter":"`+strconv.FormatInt(want, 10)+`"`) {
		t.Fatalf("admin decode: %d %s, want counter %d", st, body, want)
	}
	if st, body := send(t, "GET", b.URL+"/admin/opaque/"+tag+"/"+strconv.FormatInt(ids[0], 10), "", ""); st != 401 && st != 403 {
		t.Fatalf("admin decode without the token: %d %s", st, body)
	}

	// Ranges would be raw counters.
	if st, body := send(t, "POST", a.URL+"/segment/"+tag+"/range?size=100", "", ""); st != 409 || errorCode(body) != "opaque_tag_range" {
		t.Fatalf("range of an opaque tag: %d %s, want 409 opaque_tag_range", st, body)
	}

	// Another key, or none: the tag is refused, plain tags are served.
	c := proctest.Serve(t, bin, append(env, "IDGEN_OPAQUE_KEY="+opaqueKeyB))
	d := proctest.Serve(t, bin, env)
	for _, tc := range []struct {
		p    *proctest.Proc
		code string
	}{{c, "opaque_key_mismatch"}, {d, "opaque_key_missing"}} {
		client := &http.Client{Timeout: 30 * time.Second}
		if st, body, _ := tc.p.Get(context.Background(), client, "/id/"+tag); st != 503 || errorCode(body) != tc.code || strings.Contains(body, "ff1:") {
			t.Errorf("%s: GET opaque tag = %d %s, want 503 %s with a fixed message", tc.code, st, body, tc.code)
		}
		if st, body, _ := tc.p.Get(context.Background(), client, "/id/"+plain); st != 200 {
			t.Errorf("%s: GET plain tag = %d %s", tc.code, st, body)
		}
	}
	if !strings.Contains(c.Log(), "created under key "+key.Fingerprint()) {
		t.Errorf("the mismatched instance's log must name both keys' fingerprints:\n%s", c.Log())
	}

	// A tag never switches, used or not.
	for _, name := range []string{plain, tag} {
		if st, body := send(t, "PATCH", a.URL+"/admin/tags/"+name, e2eAdmin, `{"opaque":true}`); st != 409 || errorCode(body) != "opaque_fixed" {
			t.Fatalf("switch %s: %d %s, want 409 opaque_fixed", name, st, body)
		}
	}

	// The CLI lists the fingerprint and decodes with the key file.
	out, err := exec.CommandContext(context.Background(), bin, "tag", "list", "--store", srv.DSN).CombinedOutput()
	if err != nil || !strings.Contains(string(out), key.Fingerprint()) {
		t.Fatalf("tag list: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(context.Background(), bin, "opaque", "decode", tag, strconv.FormatInt(ids[0], 10), "--opaque-key-file", keyFile, "--store", srv.DSN).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "counter "+strconv.FormatInt(want, 10)) {
		t.Fatalf("opaque decode: %v\n%s", err, out)
	}
}

// parseAnyID reads a decimal or a readable ID.
func parseAnyID(t *testing.T, s string) int64 {
	if id, err := strconv.ParseInt(s, 10, 64); err == nil {
		return id
	}
	_, id, err := readable.Decode(s)
	if err != nil {
		t.Fatalf("%q is neither a decimal nor a readable ID: %v", s, err)
	}
	return id
}

// Auto-created tags can be opaque too, and an opaque serve refuses to
// start without its key.
func TestServe_AutoCreateOpaque(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	env := []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db"), "IDGEN_METRICS_TOKEN=" + e2eMetrics}
	out, err := exec.CommandContext(context.Background(), bin, "serve", "--addr", "127.0.0.1:0", "--auto-create-opaque").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--auto-create-opaque needs the opaque key") {
		t.Fatalf("serve --auto-create-opaque without a key: %v\n%s", err, out)
	}
	p := proctest.Serve(t, bin, append(env, "IDGEN_OPAQUE_KEY="+opaqueKeyA), "--auto-create-opaque")
	key, _ := opaque.ParseKey(opaqueKeyA)
	client := &http.Client{Timeout: 10 * time.Second}
	prev := int64(0)
	for i := range 20 {
		st, body, err := p.Get(context.Background(), client, "/id/fresh")
		if err != nil || st != 200 {
			t.Fatalf("GET /id/fresh: %d %s %v", st, body, err)
		}
		var r struct{ ID string }
		_ = json.Unmarshal([]byte(body), &r)
		id, _ := strconv.ParseInt(r.ID, 10, 64)
		c, err := key.Decode("fresh", id)
		if err != nil || c != int64(i+1) || id == c || id == prev {
			t.Fatalf("ID %d decodes to %d (%v), want counter %d", id, c, err, i+1)
		}
		prev = id
	}
}
