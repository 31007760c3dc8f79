package httpbench

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/proctest"
)

// opaqueBenchKey is a fixed AES-256 key, as `idgen opaque keygen` makes:
// the key size production runs with.
const (
	opaqueBenchKey   = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	opaqueBenchAdmin = "bench-admin-token"
	opaqueBatch      = 10000
)

// TestLiveOpaque measures GET /id/{tag} of one idgen binary (SQLite,
// --access-log=false, an opaque key) on a plain and an opaque tag with
// wrk, rounds interleaved plain, opaque, plain…, and a count=10000 batch
// of each one request at a time. Both tags live in one process, so the
// ratio is the opaque tag's own cost: the FF1 encryptions and the longer
// numbers they write.
func TestLiveOpaque(t *testing.T) {
	out := requireLive(t)
	p := currentPlan()
	// The two sides differ by well under a percent of a request's cost,
	// so more and shorter rounds: the median of the round ratios then
	// holds against a machine whose load drifts within a round.
	if !*liveQuick {
		p.rounds, p.round = 2*p.rounds, max(time.Second, (p.round*3/5).Round(time.Second)) // wrk takes whole seconds
	}
	dir := t.TempDir()
	idgen := proctest.Serve(t, proctest.Binary(t, dir), []string{"IDGEN_STORE=sqlite://" + filepath.Join(dir, "idgen.db"),
		"IDGEN_OPAQUE_KEY=" + opaqueBenchKey, "IDGEN_ADMIN_TOKEN=" + opaqueBenchAdmin,
		"IDGEN_METRICS_TOKEN=metrics-token-of-the-opaque-bench"}, "--access-log=false")
	for _, body := range []string{`{"tag":"plain","step":100000}`, `{"tag":"opaque","step":100000,"opaque":true}`} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, idgen.URL+"/admin/tags", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+opaqueBenchAdmin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /admin/tags %s: %d", body, resp.StatusCode)
		}
	}
	res := OpaqueResult{Quick: *liveQuick, LoadAvg: LoadAvg{Start: loadAvg()}, Rounds: p.rounds, Seconds: p.round.Seconds(), Batch: opaqueBatch}
	wrk := func(path string, conns int, d time.Duration) WrkResult {
		t.Helper()
		r, err := Wrk{URL: idgen.URL + path, Threads: min(wrkThreads, conns), Conns: conns, Duration: d, PID: idgen.PID()}.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r.Non2xx > 0 || r.SocketErrors > 0 {
			t.Fatalf("%s: %d non-2xx answers, %d socket errors", path, r.Non2xx, r.SocketErrors)
		}
		return r
	}
	warm := min(p.round, 2*time.Second)
	for _, tag := range []string{"plain", "opaque"} {
		wrk("/id/"+tag, wrkConns, warm)
	}
	for _, conns := range throughputConns {
		tp := Throughput{Conns: conns}
		for r := range p.rounds {
			tp.Floor = append(tp.Floor, wrk("/id/plain", conns, p.round))
			tp.Idgen = append(tp.Idgen, wrk("/id/opaque", conns, p.round))
			t.Logf("c%d round %d: plain %.0f req/s %.1f µs CPU/req, opaque %.0f req/s %.1f µs CPU/req", conns, r+1,
				tp.Floor[r].RPS, tp.Floor[r].CPUPerRequest(), tp.Idgen[r].RPS, tp.Idgen[r].CPUPerRequest())
		}
		res.Throughput = append(res.Throughput, tp)
	}
	batch := "?count=" + strconv.Itoa(opaqueBatch)
	for r := range p.rounds {
		res.BatchPlain = append(res.BatchPlain, wrk("/id/plain"+batch, 1, p.round))
		res.BatchOpaque = append(res.BatchOpaque, wrk("/id/opaque"+batch, 1, p.round))
		t.Logf("round %d, batches of %d: plain %.0f req/s, opaque %.0f req/s", r+1, opaqueBatch, res.BatchPlain[r].RPS, res.BatchOpaque[r].RPS)
	}
	res.LoadAvg.End = loadAvg()
	writeJSON(t, out, OpaqueFile, res)
	t.Log("\n" + res.Markdown())
}
