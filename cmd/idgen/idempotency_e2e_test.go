package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/internal/proctest"
	"github.com/idgen/idgen/internal/testtime"
	"github.com/idgen/idgen/segment/segmenttest"
	"github.com/idgen/idgen/store/dbtest"
	"github.com/idgen/idgen/store/sqlite"
)

// Two real `idgen serve` processes share one database. 1,000 keys are
// each sent 3 times, the 3 at once and spread over both instances: every
// key must get one ID set, the same on every answer, and the instances
// together must have allocated exactly one set per key.
func TestServe_IdempotencyTwoInstances(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t, t.TempDir())
	for _, k := range []string{"postgres", "mysql", "sqlite"} {
		t.Run(k, func(t *testing.T) {
			var dsn string
			switch k {
			case "postgres":
				dsn = dbtest.Start(t, dbtest.Postgres).DSN
			case "mysql":
				dsn = dbtest.Start(t, dbtest.MySQL).DSN
			default: // one host, two processes on one file
				dsn = "sqlite://" + filepath.Join(t.TempDir(), "idgen.db")
			}
			env := []string{"IDGEN_STORE=" + dsn}
			a := proctest.Serve(t, bin, env, "--default-step", "20", "--access-log=false")
			b := proctest.Serve(t, bin, env, "--default-step", "20", "--access-log=false", "--migrate=false")
			runIdempotencyE2E(t, []*proctest.Proc{a, b})
		})
	}
}

type keyedAnswer struct {
	status   int
	body     string
	replayed bool
	code     string
}

func sendKeyed(ctx context.Context, hc *http.Client, p *proctest.Proc, path, key string) (keyedAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return keyedAnswer{}, err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := hc.Do(req)
	if err != nil {
		return keyedAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	a := keyedAnswer{status: resp.StatusCode, body: string(body), replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if a.status != 200 {
		var e struct{ Error struct{ Code string } }
		_ = json.Unmarshal(body, &e)
		a.code = e.Error.Code
	}
	return a, err
}

func runIdempotencyE2E(t *testing.T, procs []*proctest.Proc) {
	const keys, sends, wave, count = 1000, 3, 50, 3
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	tag := segmenttest.UniqueTag("idem")
	path := "/id/" + tag + "?count=" + strconv.Itoa(count)
	start := time.Now()

	bodies := make([][]string, keys) // per key, the body of each send
	var mu sync.Mutex
	var conflicts409, replays int
	concurrentWaves(t, keys, sends, wave, func(i, s int) {
		p := procs[(i+s)%len(procs)]
		key := fmt.Sprintf("order-%04d", i)
		ans, polls, err := pollKeyed(func() (keyedAnswer, error) { return sendKeyed(ctx, hc, p, path, key) },
			func(a keyedAnswer) bool {
				return a.status == http.StatusConflict && a.code == "idempotency_key_in_flight"
			})
		if err != nil {
			t.Errorf("%s: %v", key, err)
			return
		}
		if ans.status != 200 {
			t.Errorf("%s: %d %s\nserver log: %s", key, ans.status, ans.body, logLine(p.Log(), ans.body))
			return
		}
		mu.Lock()
		defer mu.Unlock()
		conflicts409 += polls
		bodies[i] = append(bodies[i], ans.body)
		if ans.replayed {
			replays++
		}
	})

	// One ID set per key, the same on each of its answers; no ID twice.
	seen := map[string]string{}
	var all []int64
	for i, bs := range bodies {
		if len(bs) != sends {
			t.Fatalf("key %d: %d answers; want %d", i, len(bs), sends)
		}
		for _, b := range bs[1:] {
			if b != bs[0] {
				t.Fatalf("key %d got two answers: %q and %q", i, bs[0], b)
			}
		}
		if other, dup := seen[bs[0]]; dup {
			t.Fatalf("keys %d and %s got the same IDs %s", i, other, bs[0])
		}
		seen[bs[0]] = strconv.Itoa(i)
		var r struct{ IDs []string }
		if err := json.Unmarshal([]byte(bs[0]), &r); err != nil || len(r.IDs) != count {
			t.Fatalf("key %d: %q: %v", i, bs[0], err)
		}
		for _, s := range r.IDs {
			id, _ := strconv.ParseInt(s, 10, 64)
			all = append(all, id)
		}
	}
	if len(seen) != keys || segmenttest.Duplicates(all) != 0 {
		t.Fatalf("%d distinct ID sets, %d duplicate IDs; want %d and 0", len(seen), segmenttest.Duplicates(all), keys)
	}
	if replays != keys*(sends-1) {
		t.Errorf("%d answers said Idempotent-Replayed; want %d", replays, keys*(sends-1))
	}
	// The instances allocated exactly one set per key: no first request
	// allocated twice, and no winner's IDs were thrown away.
	var issued float64
	for _, p := range procs {
		issued += metric(t, ctx, hc, p, "idgen_ids_issued_total", `tag="`+tag+`"`)
	}
	if issued != keys*count {
		t.Fatalf("the instances issued %v IDs of %s; want %d (one set per key)", issued, tag, keys*count)
	}
	elapsed := time.Since(start)

	// A used key for another request: 422, on either instance.
	for i := range 100 {
		ans, err := sendKeyed(ctx, hc, procs[i%len(procs)], "/id/"+tag+"?count=2", fmt.Sprintf("order-%04d", i))
		if err != nil || ans.status != http.StatusUnprocessableEntity || ans.code != "idempotency_key_reused" {
			t.Fatalf("reused key %d: %+v %v; want 422 idempotency_key_reused", i, ans, err)
		}
	}
	// And a late repeat still replays, from the other instance.
	for i := range keys {
		ans, err := sendKeyed(ctx, hc, procs[(i+1)%len(procs)], path, fmt.Sprintf("order-%04d", i))
		if err != nil || !ans.replayed || ans.body != bodies[i][0] {
			t.Fatalf("late repeat of key %d: %+v %v; want the first answer replayed", i, ans, err)
		}
	}
	var stored float64
	for _, p := range procs {
		stored += metric(t, ctx, hc, p, "idgen_idempotency_keys_stored_total", "")
	}
	if stored != keys {
		t.Errorf("idgen_idempotency_keys_stored_total sums to %v; want %d", stored, keys)
	}
	t.Logf("%d keys x %d concurrent sends over %d instances in %v: %d distinct ID sets, %d duplicate IDs, %v IDs issued, %d answers 409 before the first completed",
		keys, sends, len(procs), elapsed.Round(time.Millisecond), len(seen), segmenttest.Duplicates(all), issued, conflicts409)
}

// pollKeyed sends until the answer is not inFlight, or 200 times in
// flight, and returns the last answer and how many were in flight
// before it. It polls faster than Retry-After or RetryInfo say: first
// requests here finish in milliseconds.
func pollKeyed[A any](send func() (A, error), inFlight func(A) bool) (ans A, polls int, err error) {
	testtime.Until(10*time.Minute, 10*time.Millisecond, func() bool { // the bound is the 200 polls
		if ans, err = send(); err != nil || !inFlight(ans) || polls == 200 {
			return true
		}
		polls++
		return false
	})
	return ans, polls, err
}

// concurrentWaves calls send(i, s) for every key i below keys and send s
// below sends, wave keys at a time; the sends of a wave start together,
// so a key's sends race each other. It stops the test after a wave that
// failed.
func concurrentWaves(t *testing.T, keys, sends, wave int, send func(i, s int)) {
	t.Helper()
	for w := 0; w < keys; w += wave {
		var ready, wg sync.WaitGroup
		gate := make(chan struct{})
		for i := w; i < min(w+wave, keys); i++ {
			for s := range sends {
				ready.Add(1)
				wg.Go(func() {
					ready.Done()
					<-gate
					send(i, s)
				})
			}
		}
		ready.Wait()
		close(gate)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
}

// metric returns the value of the first series of name whose labels
// contain labels, or 0 if there is none.
func metric(t *testing.T, ctx context.Context, hc *http.Client, p *proctest.Proc, name, labels string) float64 {
	t.Helper()
	status, body, err := p.Get(ctx, hc, "/metrics")
	if err != nil || status != 200 {
		t.Fatalf("/metrics: %d %v", status, err)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || !strings.Contains(line, labels) {
			continue
		}
		rest := strings.TrimPrefix(line, name)
		if rest != "" && rest[0] != ' ' && rest[0] != '{' {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return v
	}
	return 0
}

// An instance that died holding a key (its placeholder row in flight)
// blocks the key's retries with 409 until its hold expires, and then the
// next retry takes the key over and allocates, on another process.
func TestServe_IdempotencyCrashedWinnerIsTakenOver(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t, t.TempDir())
	path := filepath.Join(t.TempDir(), "idgen.db")
	p := proctest.Serve(t, bin, []string{"IDGEN_STORE=sqlite://" + path}, "--access-log=false")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	hc := &http.Client{Timeout: 10 * time.Second}
	tag := segmenttest.UniqueTag("crash")
	// The row a dead instance left: its request's fingerprint (as the
	// server computes it for GET /id/TAG), held for 3 more seconds.
	now := time.Now()
	dead := idempotency.Record{Scope: idempotency.AnonymousScope, Key: "k", Owner: "dead",
		Fingerprint: idempotency.Fingerprint("segment", tag, "one", "numeric", "json"),
		LockedUntil: now.Add(3 * time.Second), ExpiresAt: now.Add(time.Hour)}
	if ok, err := st.Idempotency().Insert(ctx, dead); err != nil || !ok {
		t.Fatalf("insert the dead instance's row: %v %v", ok, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/id/"+tag, nil)
	req.Header.Set("Idempotency-Key", "k")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if ra := resp.Header.Get("Retry-After"); resp.StatusCode != http.StatusConflict || (ra != "3" && ra != "2") {
		t.Fatalf("while held: %d Retry-After %q; want 409 and the hold's remaining 3s", resp.StatusCode, ra)
	}
	// The hold runs in real time (two processes share no fake clock): the
	// key answers 409 until it ends, and then a new first answer.
	var first keyedAnswer
	testtime.Until(30*time.Second, 100*time.Millisecond, func() bool {
		first, err = sendKeyed(ctx, hc, p, "/id/"+tag, "k")
		return err != nil || first.status != http.StatusConflict
	})
	if err != nil || first.status != 200 || first.replayed {
		t.Fatalf("after the hold: %+v %v; want a new first answer", first, err)
	}
	again, err := sendKeyed(ctx, hc, p, "/id/"+tag, "k")
	if err != nil || !again.replayed || again.body != first.body {
		t.Fatalf("repeat: %+v %v; want %q replayed", again, err, first.body)
	}
	// The dead instance, were it to come back, can record nothing.
	if ok, err := st.Idempotency().Complete(ctx, idempotency.AnonymousScope, "k", "dead", 200, "x", []byte("stale")); err != nil || ok {
		t.Fatalf("the old owner completed after the take-over: %v %v", ok, err)
	}
}

// logLine returns the server's log line about the request whose error
// body is body, found by its request ID.
func logLine(log, body string) string {
	var e struct {
		Error struct {
			RequestID string `json:"request_id"`
		}
	}
	if json.Unmarshal([]byte(body), &e) != nil || e.Error.RequestID == "" {
		return "(no request ID)"
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, e.Error.RequestID) {
			return l
		}
	}
	return "(none)"
}
