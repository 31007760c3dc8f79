package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/opaque"
)

const softwareAESWarning = "AES is not hardware-accelerated here"

// With GODEBUG=cpu.aes=off the Go runtime hides the AES instructions and
// crypto/aes really runs in software: serve with an opaque key warns at
// start, and its opaque IDs are still the same FF1 (they decode with the
// key here). Without a key it does not warn: no ID needs AES.
func TestServe_WarnsWhenAESIsSoftware(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := proctest.Binary(t, dir)
	store := "IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db")
	p := proctest.Serve(t, bin, []string{store, "GODEBUG=cpu.aes=off", "IDGEN_OPAQUE_KEY=" + opaqueKeyA, "IDGEN_METRICS_TOKEN=metrics-token-0123456789"}, "--auto-create-opaque")
	if !strings.Contains(p.Log(), softwareAESWarning) || !strings.Contains(p.Log(), "level=WARN") {
		t.Fatalf("serve with software AES and an opaque key: no warning at start:\n%s", p.Log())
	}
	key, err := opaque.ParseKey(opaqueKeyA)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range 3 {
		st, body, err := p.Get(context.Background(), client, "/id/order")
		if err != nil || st != http.StatusOK {
			t.Fatalf("GET /id/order: %d %s %v", st, body, err)
		}
		var r struct{ ID string }
		_ = json.Unmarshal([]byte(body), &r)
		id, _ := strconv.ParseInt(r.ID, 10, 64)
		if c, err := key.Decode("order", id); err != nil || c != int64(i+1) || id == c {
			t.Fatalf("ID %d under software AES decodes to %d (%v), want counter %d", id, c, err, i+1)
		}
	}
	p.Kill()

	plain := proctest.Serve(t, bin, []string{store, "GODEBUG=cpu.aes=off"})
	if strings.Contains(plain.Log(), softwareAESWarning) {
		t.Fatalf("serve without an opaque key warned about AES:\n%s", plain.Log())
	}
}
