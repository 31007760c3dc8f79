package main_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/opaque"
	"github.com/idgen/idgen/store/dbtest"
)

// On a real MariaDB with Leaf's own leaf_alloc, whose biz_tag Leaf's DDL
// makes case-insensitive while tag_opaque is ascii_bin, a tag marked
// opaque (by an earlier version, or an instance on id_sequence in the same
// database) is refused by an instance on --sequence-table leaf_alloc on
// every route and in every spelling, /id/ORDER included, rather than
// served as raw counters; a plain tag beside it is served.
func TestServe_LeafAllocRefusesOpaqueTags(t *testing.T) {
	t.Parallel()
	srv := dbtest.Start(t, dbtest.MySQL)
	bin := proctest.Binary(t, t.TempDir())
	_, exec1 := mysqlDB(t, srv.DSN)
	ctx := context.Background()
	exec1("DROP TABLE IF EXISTS leaf_alloc")
	exec1(leafAllocDDL)
	exec1(`INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('order', 1, 1000, NULL), ('plain', 1, 1000, NULL)`)
	if out, err := runCLI(bin, nil, "migrate", "--sequence-table", "leaf_alloc", "--store", srv.DSN); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	key, _ := opaque.ParseKey(opaqueKeyA)
	exec1(`INSERT INTO tag_opaque (biz_tag, key_fingerprint) VALUES ('order', ?)`, key.Fingerprint())

	// Creating an opaque tag there is refused too.
	if out, err := runCLI(bin, []string{"IDGEN_OPAQUE_KEY=" + opaqueKeyA}, "tag", "add", "other", "--opaque", "--sequence-table", "leaf_alloc", "--store", srv.DSN); err == nil || !strings.Contains(out, "refused with --sequence-table leaf_alloc") {
		t.Fatalf("tag add --opaque on leaf_alloc: %v\n%s", err, out)
	}

	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=" + srv.DSN}, "--sequence-table", "leaf_alloc", "--compat", "leaf")
	client := &http.Client{Timeout: 30 * time.Second}
	post := func(path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for round := range 3 { // the first call learns the tag, later ones use what it learnt
		for _, tc := range []struct{ method, path, body string }{
			{"GET", "/id/ORDER", ""},
			{"GET", "/id/order", ""},
			{"GET", "/id/Order?count=5", ""},
			{"GET", "/segment/ORDER", ""},
			{"GET", "/api/segment/get/ORDER", ""},
			{"POST", "/segment/ORDER/range?size=10", ""},
			{"POST", "/idgen.v1.IDService/Next", `{"tag":"ORDER"}`},
		} {
			var st int
			var body string
			var err error
			if tc.method == "GET" {
				st, body, err = p.Get(ctx, client, tc.path)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				st, body = post(tc.path, tc.body)
			}
			if st == 200 || !strings.Contains(body, "opaque_refused") {
				t.Fatalf("round %d: %s %s = %d %s: a tag marked opaque must be refused (opaque_refused), never served raw", round, tc.method, tc.path, st, body)
			}
		}
	}
	if st, body, err := p.Get(ctx, client, "/id/plain"); err != nil || st != 200 || !strings.Contains(body, `"id":"`) {
		t.Fatalf("GET /id/plain on leaf_alloc: %d %s %v", st, body, err)
	}
	if !strings.Contains(p.Log(), `tag_opaque marks opaque as \"order\"`) {
		t.Fatalf("the log must say why ORDER is refused:\n%s", p.Log())
	}
}
