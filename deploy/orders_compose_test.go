package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
// through the published port, as a client would: a double click (one
// Idempotency-Key twice at once) places one order and answers both with
// it; concurrent orders of one user all succeed, with IDs and lock
// tokens of their own; and the consumer ships every order exactly once.
// Last, SIGTERM stops the service cleanly as PID 1.
func TestOrdersCompose_Stack(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the compose stack takes about a minute")
	}
	tool := requireStackTools(t)
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	t0 := time.Now()
	image, err := buildImage(ctx, root, ".ci/orders-image.sh", "idgen-orders:ci")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s built in %.1fs", image, time.Since(t0).Seconds())

	port := testkit.FreePorts(t, 1)[0]
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	s := &stack{
		tool:     tool,
		dir:      root,
		files:    []string{"examples/orders/docker-compose.yml"},
		services: 3,
		project:  "idgen-orders-ci-" + randomHex(t, 4),
		env: append(os.Environ(),
			"ORDERS_PUBLISH_ADDR=127.0.0.1",
			"ORDERS_PORT="+strconv.Itoa(port),
			"ORDERS_IMAGE="+image,
			"POSTGRES_IMAGE="+pickImage(ctx, "IDGEN_TEST_POSTGRES_IMAGE", "idgen-test/postgres:15", "postgres:17-alpine"),
			"REDIS_IMAGE="+pickImage(ctx, "IDGEN_TEST_REDIS_IMAGE", "idgen-test/redis:7", "redis:7-alpine"),
		),
		urls: map[string]string{"orders": base},
	}
	t.Cleanup(func() { s.down(t) })

	t0 = time.Now()
	if _, err := s.compose(ctx, "up", "-d", "--no-build"); err != nil {
		t.Fatal(err)
	}
	if err := s.waitHealthy(ctx, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("project %s: 3 containers healthy and /readyz 200 %.1fs after up", s.project, time.Since(t0).Seconds())

	// The health probe must be able to fail, or the container would be
	// "healthy" whatever it serves.
	if out, err := s.compose(ctx, "exec", "-T", "orders", "/orders", "health", "-url", "http://127.0.0.1:9/readyz"); err == nil {
		t.Errorf("orders health against a closed port exited 0; want non-zero\n%s", out)
	}

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	c := &ordersClient{client: client, base: base}

	// A double click: one key, twice at once.
	clicks := c.placeAll(ctx, []orderReq{{"ann", "click-1"}, {"ann", "click-1"}})
	a, b := clicks[0], clicks[1]
	if a.err != nil || b.err != nil || a.status != http.StatusCreated || b.status != http.StatusCreated ||
		a.out.ID == "" || a.out.ID != b.out.ID || a.replayed == b.replayed {
		t.Fatalf("double click: %+v and %+v; want one order, answered twice (once replayed)", a, b)
	}
	ids := []string{a.out.ID}
	t.Logf("double click: order %s, placed once and replayed once", a.out.ID)

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
	for i, p := range placed {
		if p.err != nil || p.status != http.StatusCreated || p.out.ID == "" {
			t.Fatalf("order %d of cat: %+v", i, p)
		}
		if seenID[p.out.ID] || seenToken[p.out.Token] {
			t.Fatalf("order %d of cat: ID %s or token %s given twice", i, p.out.ID, p.out.Token)
		}
		seenID[p.out.ID], seenToken[p.out.Token] = true, true
		ids = append(ids, p.out.ID)
	}
	t.Logf("%d concurrent orders of one user in %.2fs: distinct IDs and lock tokens", n, time.Since(t0).Seconds())

	// The relay publishes each outbox row to Redis and the consumer ships
	// it: every order reaches shipped 1, and none goes past it.
	t0 = time.Now()
	var twice error // an order shipped more than once: no point waiting on
	err = testkit.WaitFor(60*time.Second, 200*time.Millisecond, func() error {
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
		return nil
	})
	if twice != nil {
		t.Fatal(twice)
	}
	if err != nil {
		t.Fatalf("the consumer did not ship every order within 60 s: %v", err)
	}
	t.Logf("%d orders shipped %.2fs after the last was placed", len(ids), time.Since(t0).Seconds())

	// The same from PostgreSQL: no second shipment (which GET would
	// show too), the user's read-then-write count lost no order, and the
	// outbox is empty.
	got := s.psql(ctx, t, `SELECT (SELECT COUNT(*) FROM shipments) || ' ' || (SELECT COUNT(DISTINCT order_id) FROM shipments) || ' ' ||
		(SELECT orders FROM users WHERE user_id = 'cat') || ' ' || (SELECT COUNT(*) FROM outbox WHERE sent = 0)`)
	if want := fmt.Sprintf("%d %d %d 0", len(ids), len(ids), n); got != want {
		t.Errorf("shipments, orders shipped, cat's order count, unsent outbox rows = %s; want %s", got, want)
	}

	// docker stop: SIGTERM to /orders as PID 1 drains and exits 0 well
	// within stop_grace_period, not killed at its end.
	t0 = time.Now()
	if _, err := s.compose(ctx, "stop", "-t", "15", "orders"); err != nil {
		t.Fatal(err)
	}
	stopped := time.Since(t0)
	code, err := s.inspect(ctx, "orders", "{{.State.ExitCode}}")
	if err != nil {
		t.Fatal(err)
	}
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

func (c *ordersClient) place(ctx context.Context, r orderReq) orderAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/orders", strings.NewReader(`{"item":"book","qty":1}`))
	if err != nil {
		return orderAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", r.user)
	req.Header.Set("Idempotency-Key", r.key)
	resp, err := c.client.Do(req)
	if err != nil {
		return orderAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	a := orderAnswer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true", body: string(b), err: err}
	if err == nil && resp.StatusCode == http.StatusCreated {
		a.err = json.Unmarshal(b, &a.out)
	}
	return a
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
