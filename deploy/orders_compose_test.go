package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idgen/idgen/internal/testkit"
)

// ordersHealthCheck is the orders container's health check, in
// examples/orders/Dockerfile and its docker-compose.yml alike.
var ordersHealthCheck = []string{"CMD", "/orders", "health"}

// TestOrdersComposeFile_Portable checks, without Docker, that
// examples/orders/docker-compose.yml keeps to what both compose tools
// read and has the shape TestOrdersCompose_Stack and the file's header
// rely on: the service on PostgreSQL and Redis, started once both are
// healthy, published on loopback only.
func TestOrdersComposeFile_Portable(t *testing.T) {
	root := repoRoot(t)
	services := portableServices(t, filepath.Join(root, "examples", "orders", "docker-compose.yml"), []string{"orders", "postgres", "redis"})

	svc := mapAt(t, services, "orders")
	if got := stringsOf(mapAt(t, svc, "healthcheck")["test"]); !slices.Equal(got, ordersHealthCheck) {
		t.Errorf("orders: healthcheck test = %q, want %q", got, ordersHealthCheck)
	}
	env := mapAt(t, svc, "environment")
	if s, _ := env["ORDERS_STORE"].(string); !strings.HasPrefix(s, "postgres://") || !strings.Contains(s, "@postgres:5432/") {
		t.Errorf("orders: ORDERS_STORE = %q, want postgres://…@postgres:5432/…", s)
	}
	if env["ORDERS_REDIS"] != "redis:6379" {
		t.Errorf("orders: ORDERS_REDIS = %v, want redis:6379", env["ORDERS_REDIS"])
	}
	// Loopback inside a container is the container's own: the published
	// port would reach nothing.
	if env["ORDERS_ADDR"] != "0.0.0.0:8081" {
		t.Errorf("orders: ORDERS_ADDR = %v, want 0.0.0.0:8081", env["ORDERS_ADDR"])
	}
	for _, db := range []string{"postgres", "redis"} {
		if dep := mapAt(t, mapAt(t, svc, "depends_on"), db); dep["condition"] != "service_healthy" {
			t.Errorf("orders: depends_on %s condition = %v, want service_healthy", db, dep["condition"])
		}
	}
	port := "${ORDERS_PUBLISH_ADDR:-127.0.0.1}:${ORDERS_PORT:-8081}:8081"
	if got := stringsOf(svc["ports"]); !slices.Equal(got, []string{port}) {
		t.Errorf("orders: ports = %q, want [%q]", got, port)
	}
	for _, db := range []string{"postgres", "redis"} {
		if p := mapAt(t, services, db)["ports"]; p != nil {
			t.Errorf("%s: ports = %v: only the order service is published", db, p)
		}
	}
	grace, err := time.ParseDuration(fmt.Sprint(svc["stop_grace_period"]))
	if err != nil || grace <= 10*time.Second {
		t.Errorf("orders: stop_grace_period = %v, want more than the service's 10 s drain", svc["stop_grace_period"])
	}
	if svc["read_only"] != true {
		t.Errorf("orders: read_only = %v, want true: on PostgreSQL the service writes nothing", svc["read_only"])
	}
	// The build context is the repository root: the example builds
	// against the module.
	if b, _ := svc["build"].(map[string]any); b == nil || b["context"] != "../.." || b["dockerfile"] != "examples/orders/Dockerfile" {
		t.Errorf("orders: build = %v, want context ../.. and dockerfile examples/orders/Dockerfile", svc["build"])
	}
	checkDockerfile(t, filepath.Join(root, "examples", "orders", "Dockerfile"), ordersHealthCheck[1:])
}

// TestOrdersCompose_Stack runs examples/orders/docker-compose.yml on the
// offline images: PostgreSQL and Redis from .ci/docker-images.sh, the
// order service from a scratch image of its binary. Then, from outside
// through the published port, as a client would (retrying what the
// service asks to be retried, with the same key): a double click (one
// Idempotency-Key twice at once) places one order and answers both with
// it; concurrent orders of one user all succeed, with IDs and lock
// tokens of their own; the consumer ships every order, and each once
// more delivered (the relay publishes the whole outbox again) is still
// shipped exactly once. Last, SIGTERM stops the service cleanly as PID 1.
func TestOrdersCompose_Stack(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the compose stack takes about a minute")
	}
	tool := requireStackTools(t)
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	// The image is tagged per run: on a shared engine another run may
	// build its own between this run's build and its up.
	run := randomHex(t, 4)
	t0 := time.Now()
	image, err := buildImage(ctx, root, ".ci/orders-image.sh", "idgen-orders:ci-"+run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeImage(t, image) }) // after s.down: cleanups run last first
	t.Logf("image %s built in %.1fs", image, time.Since(t0).Seconds())

	port := testkit.FreePorts(t, 1)[0]
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	s := &stack{
		tool:     tool,
		dir:      root,
		files:    []string{"examples/orders/docker-compose.yml"},
		services: 3,
		project:  "idgen-orders-ci-" + run,
		env: append(os.Environ(),
			"ORDERS_PUBLISH_ADDR=127.0.0.1",
			"ORDERS_PORT="+strconv.Itoa(port),
			"ORDERS_IMAGE="+image,
			"POSTGRES_IMAGE="+pickImage(ctx, "IDGEN_TEST_POSTGRES_IMAGE", "idgen-test/postgres:15", "postgres:17-alpine"),
			"REDIS_IMAGE="+pickImage(ctx, "IDGEN_TEST_REDIS_IMAGE", "idgen-test/redis:7", "redis:7-alpine"),
		),
		urls: map[string]string{"orders": base},
	}
	t.Logf("project %s: 3 containers healthy and /readyz 200 %.1fs after up", s.project, s.up(ctx, t).Seconds())

	// The health probe must be able to fail, or the container would be
	// "healthy" whatever it serves.
	if out, err := s.compose(ctx, "exec", "-T", "orders", "/orders", "health", "-url", "http://127.0.0.1:9/readyz"); err == nil {
		t.Errorf("orders health against a closed port exited 0; want non-zero\n%s", out)
	}

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	c := &ordersClient{client: client, base: base}

	// The stack's first order creates the tag's segment and lock rows,
	// which is slow on a loaded machine: not the double click's to wait
	// out.
	warm := c.place(ctx, orderReq{"dan", "warm-1"})
	if warm.err != nil || warm.status != http.StatusCreated || warm.out.ID == "" {
		t.Fatalf("warm-up order: %+v", warm)
	}
	ids := []string{warm.out.ID}

	// A double click: one key, twice at once. The second waits for the
	// first's answer, or is told 409 to retry and then gets it replayed.
	clicks := c.placeAll(ctx, []orderReq{{"ann", "click-1"}, {"ann", "click-1"}})
	a, b := clicks[0], clicks[1]
	if a.err != nil || b.err != nil || a.status != http.StatusCreated || b.status != http.StatusCreated ||
		a.out.ID == "" || a.out.ID != b.out.ID || a.replayed == b.replayed {
		t.Fatalf("double click: %+v and %+v; want one order, answered twice (once replayed)", a, b)
	}
	ids = append(ids, a.out.ID)
	t.Logf("double click: order %s, placed once and replayed once (%d and %d attempts)", a.out.ID, a.attempts, b.attempts)

	// Concurrent orders of one user, each with a key of its own: the
	// user's lock runs them one at a time, each under a newer token.
	const n = 12
	reqs := make([]orderReq, n)
	for i := range reqs {
		reqs[i] = orderReq{"cat", fmt.Sprintf("cat-%d", i)}
	}
	t0 = time.Now()
	placed := c.placeAll(ctx, reqs)
	seenID, seenToken := map[string]bool{}, map[string]bool{}
	retried := 0
	for i, p := range placed {
		if p.err != nil || p.status != http.StatusCreated || p.out.ID == "" {
			t.Fatalf("order %d of cat: %+v", i, p)
		}
		if p.attempts > 1 {
			retried++
		}
		if seenID[p.out.ID] || seenToken[p.out.Token] {
			t.Fatalf("order %d of cat: ID %s or token %s given twice", i, p.out.ID, p.out.Token)
		}
		seenID[p.out.ID], seenToken[p.out.Token] = true, true
		ids = append(ids, p.out.ID)
	}
	t.Logf("%d concurrent orders of one user in %.2fs (%d retried after 503): distinct IDs and lock tokens", n, time.Since(t0).Seconds(), retried)

	// The relay publishes each outbox row to Redis and the consumer ships
	// it: every order reaches shipped 1, and none goes past it. The relay
	// marks a row sent only after publishing it, so the outbox is part
	// of what is waited for, not checked after.
	t0 = time.Now()
	if err := waitShipped(ctx, t, s, c, ids, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d orders shipped %.2fs after the last was placed", len(ids), time.Since(t0).Seconds())
	s.checkShipments(ctx, t, len(ids), n)

	// Exactly once, not merely once: a run without faults publishes each
	// order once, which a consumer without dedup ships once too. So
	// deliver every order again, as a relay that crashed between
	// publishing and marking sent would: the whole outbox unsent, and
	// the relay publishes each row a second time, in its own format.
	before := s.streamState(ctx, t)
	if before.length != len(ids) || before.entriesRead != len(ids) {
		t.Fatalf("before the redelivery: %+v; want %d messages, all read", before, len(ids))
	}
	t0 = time.Now()
	if got := s.psql(ctx, t, `WITH r AS (UPDATE outbox SET sent = 0 RETURNING 1) SELECT COUNT(*) FROM r`); got != strconv.Itoa(len(ids)) {
		t.Fatalf("outbox rows set unsent again: %s, want %d", got, len(ids))
	}
	var after streamState
	err = testkit.WaitFor(60*time.Second, 300*time.Millisecond, func() error {
		after = s.streamState(ctx, t)
		if after.length != 2*len(ids) || after.entriesRead != after.length || after.pending != 0 {
			return fmt.Errorf("stream %+v; want %d messages, all read and acknowledged", after, 2*len(ids))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the redelivered orders were not consumed within 60 s: %v", err)
	}
	t.Logf("every order delivered again: the consumer group read %d then %d messages, none pending (%.2fs)",
		before.entriesRead, after.entriesRead, time.Since(t0).Seconds())
	for _, id := range ids {
		st, err := c.get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Shipped != 1 {
			t.Errorf("order %s: shipped %d after its second delivery, want 1", id, st.Shipped)
		}
	}
	s.checkShipments(ctx, t, len(ids), n)

	// docker stop: SIGTERM to /orders as PID 1 drains and exits 0 well
	// within stop_grace_period, not killed at its end.
	code, stopped := s.stop(ctx, t, "orders")
	if code != "0" || stopped >= 15*time.Second {
		t.Errorf("orders: stop took %v, exit code %s; want a clean SIGTERM exit", stopped.Round(time.Millisecond), code)
	}
	t.Logf("orders stopped by SIGTERM in %.2fs, exit code %s", stopped.Seconds(), code)
}

// buildImage runs the image script (.ci/compose-image.sh or
// .ci/orders-image.sh) for tag and returns the tag.
func buildImage(ctx context.Context, root, script, tag string) (string, error) {
	c := exec.CommandContext(ctx, "bash", script, tag)
	c.Dir = root
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("bash %s %s: %w\n%s", script, tag, err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}

// removeImage removes a run's own image, once its containers are gone.
func removeImage(t *testing.T, image string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "image", "rm", image).CombinedOutput(); err != nil {
		t.Errorf("cleanup: docker image rm %s: %v\n%s", image, err, out)
	}
}

// waitShipped waits until every order in ids is shipped and the outbox
// has no unsent row, and fails at once if an order is shipped twice.
func waitShipped(ctx context.Context, t *testing.T, s *stack, c *ordersClient, ids []string, timeout time.Duration) error {
	t.Helper()
	var twice error // an order shipped more than once: no point waiting on
	err := testkit.WaitFor(timeout, 200*time.Millisecond, func() error {
		for _, id := range ids {
			st, err := c.get(ctx, id)
			switch {
			case err != nil:
				return err
			case st.Shipped > 1:
				twice = fmt.Errorf("order %s shipped %d times", id, st.Shipped)
				return nil
			case st.Shipped == 0:
				return fmt.Errorf("order %s not shipped yet", id)
			}
		}
		if u := s.psql(ctx, t, `SELECT COUNT(*) FROM outbox WHERE sent = 0`); u != "0" {
			return fmt.Errorf("%s outbox rows not marked sent yet", u)
		}
		return nil
	})
	if twice != nil {
		return twice
	}
	if err != nil {
		return fmt.Errorf("the consumer did not ship every order within %v: %w", timeout, err)
	}
	return nil
}

// checkShipments checks from PostgreSQL what GET shows too: exactly one
// shipment row per order, none past it; the read-then-write count of
// cat's orders lost none; and the outbox is all sent.
func (s *stack) checkShipments(ctx context.Context, t *testing.T, orders, cats int) {
	t.Helper()
	got := s.psql(ctx, t, `SELECT (SELECT COUNT(*) FROM shipments) || ' ' || (SELECT COUNT(DISTINCT order_id) FROM shipments) || ' ' ||
		(SELECT orders FROM users WHERE user_id = 'cat') || ' ' || (SELECT COUNT(*) FROM outbox WHERE sent = 0)`)
	if want := fmt.Sprintf("%d %d %d 0", orders, orders, cats); got != want {
		t.Errorf("shipments, orders shipped, cat's order count, unsent outbox rows = %s; want %s", got, want)
	}
}

// streamState is what Redis tells of the orders stream and its consumer
// group.
type streamState struct {
	length, entriesRead, pending int
}

// streamState reads the stream's length and the shipping group's
// progress (XINFO GROUPS; entries-read is Redis 7's).
func (s *stack) streamState(ctx context.Context, t *testing.T) streamState {
	t.Helper()
	var st streamState
	out, err := s.compose(ctx, "exec", "-T", "redis", "redis-cli", "--raw", "XLEN", ordersStream)
	if err == nil {
		st.length, err = strconv.Atoi(strings.TrimSpace(out))
	}
	if err != nil {
		t.Fatalf("XLEN %s: %v", ordersStream, err)
	}
	out, err = s.compose(ctx, "exec", "-T", "redis", "redis-cli", "--raw", "XINFO", "GROUPS", ordersStream)
	if err != nil {
		t.Fatal(err)
	}
	// One group: its fields as name and value on lines of their own.
	f := strings.Split(strings.ReplaceAll(out, "\r", ""), "\n")
	fields := map[string]string{}
	for i := 0; i+1 < len(f); i += 2 {
		fields[f[i]] = f[i+1]
	}
	if fields["name"] != ordersGroup {
		t.Fatalf("XINFO GROUPS %s: no group %q in\n%s", ordersStream, ordersGroup, out)
	}
	for k, v := range map[string]*int{"entries-read": &st.entriesRead, "pending": &st.pending} {
		if *v, err = strconv.Atoi(fields[k]); err != nil {
			t.Fatalf("XINFO GROUPS %s: %s = %q\n%s", ordersStream, k, fields[k], out)
		}
	}
	return st
}

// The stream the relay publishes to and the consumer group that ships
// (examples/orders/relay.go).
const ordersStream, ordersGroup = "orders", "shipping"

// psql runs query in the stack's PostgreSQL as the orders user and
// returns its one value.
func (s *stack) psql(ctx context.Context, t *testing.T, query string) string {
	t.Helper()
	out, err := s.compose(ctx, "exec", "-T", "postgres", "psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
		"-U", "orders", "-d", "orders", "-c", query)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

type orderReq struct{ user, key string }

type orderAnswer struct {
	status   int
	replayed bool
	attempts int
	out      struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	body string
	err  error
}

// ordersClient calls the order service's API through its published port.
type ordersClient struct {
	client *http.Client
	base   string
}

// placeAll sends the orders at once: each waits at a barrier until all
// are ready to send.
func (c *ordersClient) placeAll(ctx context.Context, reqs []orderReq) []orderAnswer {
	out := make([]orderAnswer, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			<-start
			out[i] = c.place(ctx, r)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// placeAttempts bounds place's tries: with the service's Retry-After of
// 1 s, some 15 s of retrying, three times its 5 s wait for a user's lock.
const placeAttempts = 10

// place posts the order, retrying as a client should with the same
// Idempotency-Key whatever the service asks to be retried: a 409 while
// the key's first request still runs (the retry gets its answer), and
// a 503 (user_busy: the user's lock was not had in time; nothing was
// recorded under the key). It waits the Retry-After, or a backoff if
// longer.
func (c *ordersClient) place(ctx context.Context, r orderReq) orderAnswer {
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		a, retry, after := c.placeOnce(ctx, r)
		a.attempts = attempt
		if !retry || attempt == placeAttempts {
			return a
		}
		select {
		case <-ctx.Done():
			a.err = ctx.Err()
			return a
		case <-time.After(max(after, backoff)):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// placeOnce posts the order once, and says whether the answer asks for
// a retry and after how long (Retry-After; 0 if none).
func (c *ordersClient) placeOnce(ctx context.Context, r orderReq) (a orderAnswer, retry bool, after time.Duration) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/orders", strings.NewReader(`{"item":"book","qty":1}`))
	if err != nil {
		a.err = err
		return a, false, 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", r.user)
	req.Header.Set("Idempotency-Key", r.key)
	resp, err := c.client.Do(req)
	if err != nil {
		a.err = err
		return a, false, 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	a.status, a.replayed, a.body, a.err = resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true", string(b), err
	if err != nil {
		return a, false, 0
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	switch {
	case resp.StatusCode == http.StatusCreated:
		a.err = json.Unmarshal(b, &a.out)
		return a, false, 0
	case resp.StatusCode == http.StatusConflict && json.Unmarshal(b, &e) == nil && e.Error.Code == "idempotency_key_in_flight",
		resp.StatusCode == http.StatusServiceUnavailable:
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			after = time.Duration(s) * time.Second
		}
		return a, true, after
	}
	return a, false, 0
}

// orderState is what GET /orders/{id} tells of an order.
type orderState struct {
	ID      string `json:"id"`
	Shipped int    `json:"shipped"`
}

func (c *ordersClient) get(ctx context.Context, id string) (orderState, error) {
	var st orderState
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/orders/"+id, nil)
	if err != nil {
		return st, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /orders/%s: %s: %s", id, resp.Status, b)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("GET /orders/%s: %w: %s", id, err, b)
	}
	if st.ID != id {
		return st, fmt.Errorf("GET /orders/%s: the answer is order %q", id, st.ID)
	}
	return st, nil
}

// The stack test's client retries what the service asks to be retried
// (a 503, a 409 of a key in flight), with the same key, after the
// Retry-After; any other answer is final.
func TestOrdersClient_Retries(t *testing.T) {
	type reply struct {
		status     int
		retryAfter string
		body       string
	}
	var mu sync.Mutex
	var replies []reply
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get("X-User")+"/"+r.Header.Get("Idempotency-Key"))
		rp := replies[0]
		replies = replies[1:]
		if rp.retryAfter != "" {
			w.Header().Set("Retry-After", rp.retryAfter)
		}
		w.WriteHeader(rp.status)
		_, _ = io.WriteString(w, rp.body)
	}))
	defer srv.Close()
	c := &ordersClient{client: srv.Client(), base: srv.URL}
	ctx := context.Background()

	busy := `{"error":{"code":"user_busy","message":"retry"}}`
	inFlight := `{"error":{"code":"idempotency_key_in_flight","message":"retry"}}`
	replies = []reply{{503, "1", busy}, {409, "", inFlight}, {201, "", `{"id":"7","token":"3"}`}}
	t0 := time.Now()
	a := c.place(ctx, orderReq{"ann", "k1"})
	if a.err != nil || a.status != http.StatusCreated || a.out.ID != "7" || a.attempts != 3 {
		t.Fatalf("503, 409 in flight, 201: %+v; want order 7 at the third attempt", a)
	}
	if d := time.Since(t0); d < time.Second {
		t.Errorf("retried within %v: the Retry-After of 1 s was not waited", d)
	}
	if !slices.Equal(keys, []string{"ann/k1", "ann/k1", "ann/k1"}) {
		t.Errorf("attempts sent %q; want the same user and key each time", keys)
	}

	keys = nil
	replies = []reply{{409, "1", `{"error":{"code":"conflict","message":"no"}}`}}
	if a := c.place(ctx, orderReq{"ann", "k2"}); a.status != http.StatusConflict || a.attempts != 1 {
		t.Errorf("a 409 of another cause: %+v; want it final at the first attempt", a)
	}
	replies = []reply{{422, "", `{"error":{"code":"idempotency_key_reused","message":"no"}}`}}
	if a := c.place(ctx, orderReq{"ann", "k3"}); a.status != http.StatusUnprocessableEntity || a.attempts != 1 {
		t.Errorf("a 422: %+v; want it final at the first attempt", a)
	}
}
