package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/internal/testkit"
	"github.com/idgen/idgen/opaque"

	"github.com/idgen/idgen/store/dbtest"
)

// An opaque tag's flag is on its id_sequence row: the rows of
// id_sequence alone, dumped with the sqlite3 shell from one database and
// loaded into a fresh one, as an operator restores a table, bring the
// tag back opaque. An instance with the key goes on with opaque IDs
// (never a raw counter, none repeated), one with another key refuses the
// tag, and once tag_opaque is made to name another key than the row,
// a restarted instance refuses it too, with its own code.
func TestServe_OpaqueTagSurvivesARestoreOfIDSequence(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sqlite3"); err != nil {
		dbtest.Missing(t, "the sqlite3 shell is not installed (apt-get install --no-install-recommends sqlite3)")
	}
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	key, err := opaque.ParseKey(opaqueKeyA)
	if err != nil {
		t.Fatal(err)
	}
	sqlite3 := func(t *testing.T, db, stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(context.Background(), "sqlite3", append([]string{"-bail", db}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sqlite3 %s %v: %v\n%s", db, args, err, out)
		}
		return string(out)
	}
	serve := func(db, keyHex string) *proctest.Proc {
		return proctest.Serve(t, bin, []string{"IDGEN_STORE=sqlite://" + db, "IDGEN_ADMIN_TOKEN=" + e2eAdmin,
			"IDGEN_METRICS_TOKEN=" + e2eMetrics, "IDGEN_OPAQUE_KEY=" + keyHex})
	}
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(t *testing.T, p *proctest.Proc, tag string) (int, string) {
		t.Helper()
		st, body, err := p.Get(context.Background(), client, "/id/"+tag)
		if err != nil {
			t.Fatal(err)
		}
		return st, body
	}
	id := func(t *testing.T, body string) int64 {
		t.Helper()
		var r struct{ ID string }
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		v, err := strconv.ParseInt(r.ID, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return v
	}

	const tag = "invoice"
	old, restored := filepath.Join(dir, "old.db"), filepath.Join(dir, "restored.db")
	a := serve(old, opaqueKeyA)
	if st, body := send(t, "POST", a.URL+"/admin/tags", e2eAdmin, `{"tag":"`+tag+`","step":20,"opaque":true}`); st != 201 {
		t.Fatalf("create opaque tag: %d %s", st, body)
	}
	counters := map[int64]bool{}
	for range 30 {
		st, body := get(t, a, tag)
		if st != 200 {
			t.Fatalf("GET /id/%s: %d %s", tag, st, body)
		}
		c, err := key.Decode(tag, id(t, body))
		if err != nil {
			t.Fatal(err)
		}
		counters[c] = true
	}
	if err := a.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	// The dump: id_sequence's rows as INSERTs, and nothing of tag_opaque.
	dump := sqlite3(t, old, "", ".mode insert id_sequence", "SELECT * FROM id_sequence")
	if !strings.Contains(dump, key.Fingerprint()) {
		t.Fatalf("the dump of id_sequence does not hold the tag's fingerprint %s:\n%s", key.Fingerprint(), dump)
	}
	if out, err := exec.CommandContext(context.Background(), bin, "migrate", "--store", "sqlite://"+restored).CombinedOutput(); err != nil {
		t.Fatalf("migrate the fresh database: %v\n%s", err, out)
	}
	sqlite3(t, restored, dump)
	if n := strings.TrimSpace(sqlite3(t, restored, "", "SELECT COUNT(*) FROM tag_opaque")); n != "0" {
		t.Fatalf("the restored database has %s tag_opaque rows, want 0", n)
	}

	b := serve(restored, opaqueKeyA)
	for range 30 {
		st, body := get(t, b, tag)
		if st != 200 {
			t.Fatalf("after the restore, GET /id/%s: %d %s", tag, st, body)
		}
		v := id(t, body)
		c, err := key.Decode(tag, v)
		if err != nil || c == v || counters[c] {
			t.Fatalf("after the restore, ID %d decodes to counter %d (%v): want an opaque ID of a counter never handed out", v, c, err)
		}
		counters[c] = true
	}
	other := serve(restored, opaqueKeyB)
	if st, body := get(t, other, tag); st != 503 || errorCode(body) != "opaque_key_mismatch" {
		t.Fatalf("another key after the restore: %d %s, want 503 opaque_key_mismatch", st, body)
	}

	// tag_opaque naming another key than the row: refused on restart.
	sqlite3(t, restored, "", "INSERT INTO tag_opaque (biz_tag, key_fingerprint) VALUES ('"+tag+"', 'ff1v2:00000000000000ff')")
	if err := b.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	c := serve(restored, opaqueKeyA)
	if st, body := get(t, c, tag); st != 503 || errorCode(body) != "opaque_key_conflict" {
		t.Fatalf("records that disagree: %d %s, want 503 opaque_key_conflict", st, body)
	}
	// The line may be written after the answer: wait for it, boundedly.
	if err := testkit.WaitFor(10*time.Second, 20*time.Millisecond, func() error {
		if log := c.Log(); !strings.Contains(log, "ff1v2:00000000000000ff") || !strings.Contains(log, key.Fingerprint()) {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Errorf("the refusing instance's log must name both fingerprints (%v):\n%s", err, c.Log())
	}
}
