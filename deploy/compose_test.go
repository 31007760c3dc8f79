package deploy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/idgen/idgen/internal/testkit"
	"github.com/idgen/idgen/segment/segmenttest"

	"github.com/idgen/idgen/store/dbtest"
)

const pgDSN = "postgres://idgen:idgen@postgres:5432/idgen?sslmode=disable"

// idgenServices is the shape of docker-compose.yml that docs/deploy.md
// describes and TestCompose_Stack relies on.
var idgenServices = []struct {
	name, store, mode, db, portVar, port string
}{
	{"idgen-segment", pgDSN, "segment", "postgres", "IDGEN_SEGMENT_PORT", "8081"},
	{"idgen-snowflake", pgDSN, "snowflake", "postgres", "IDGEN_SNOWFLAKE_PORT", "8082"},
	{"idgen-mysql", "mysql://idgen:idgen@mysql:3306/idgen", "segment", "mysql", "IDGEN_MYSQL_PORT", "8083"},
}

// healthCheck is the container health check of every idgen service, in
// the Dockerfile and in docker-compose.yml alike.
var healthCheck = []string{"CMD", "/idgen", "health", "--url", "http://127.0.0.1:8080/readyz"}

// TestComposeFile_Portable checks, without Docker, that docker-compose.yml
// stays within what both docker compose v2 and docker-compose 1.27+ read
// (no `version`, no v2-only keys or YAML tags), and that it, the CI
// override and the Dockerfile keep the shape the stack test and
// docs/deploy.md rely on.
func TestComposeFile_Portable(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	want := []string{"mysql", "postgres"}
	for _, s := range idgenServices {
		want = append(want, s.name)
	}
	services := portableServices(t, filepath.Join(root, "docker-compose.yml"), want)

	for _, want := range idgenServices {
		svc := mapAt(t, services, want.name)
		if got := stringsOf(mapAt(t, svc, "healthcheck")["test"]); !slices.Equal(got, healthCheck) {
			t.Errorf("%s: healthcheck test = %q, want %q", want.name, got, healthCheck)
		}
		env := mapAt(t, svc, "environment")
		if env["IDGEN_STORE"] != want.store || env["IDGEN_MODE"] != want.mode {
			t.Errorf("%s: IDGEN_STORE=%v IDGEN_MODE=%v, want %s and %s", want.name, env["IDGEN_STORE"], env["IDGEN_MODE"], want.store, want.mode)
		}
		if env["IDGEN_ADMIN_TOKEN"] != "${IDGEN_ADMIN_TOKEN:-}" {
			t.Errorf("%s: IDGEN_ADMIN_TOKEN = %v, want it from the environment", want.name, env["IDGEN_ADMIN_TOKEN"])
		}
		dep := mapAt(t, mapAt(t, svc, "depends_on"), want.db)
		if dep["condition"] != "service_healthy" {
			t.Errorf("%s: depends_on %s condition = %v, want service_healthy", want.name, want.db, dep["condition"])
		}
		port := fmt.Sprintf("${IDGEN_PUBLISH_ADDR:-127.0.0.1}:${%s:-%s}:8080", want.portVar, want.port)
		if got := stringsOf(svc["ports"]); !slices.Equal(got, []string{port}) {
			t.Errorf("%s: ports = %q, want [%q]", want.name, got, port)
		}
		grace, err := time.ParseDuration(fmt.Sprint(svc["stop_grace_period"]))
		if err != nil || grace <= 10*time.Second {
			t.Errorf("%s: stop_grace_period = %v, want more than serve's --shutdown-timeout (10s)", want.name, svc["stop_grace_period"])
		}
		if svc["read_only"] != true {
			t.Errorf("%s: read_only = %v, want true: the instances write nothing", want.name, svc["read_only"])
		}
		if svc["build"] == nil {
			t.Errorf("%s: no build: `docker compose up` could not build the image", want.name)
		}
	}

	// The CI override: offline images only.
	_, override := readYAML(t, filepath.Join(root, ".ci", "compose.override.yml"))
	for name, v := range mapAt(t, override, "services") {
		if services[name] == nil {
			t.Errorf("compose.override.yml: service %s is not in docker-compose.yml", name)
		}
		img, _ := v.(map[string]any)["image"].(string)
		if img != "idgen:ci" && !strings.Contains(img, ":-idgen-test/") {
			t.Errorf("compose.override.yml: %s image %q is neither idgen:ci nor an offline idgen-test image", name, img)
		}
	}

	// The Dockerfile's HEALTHCHECK runs the same probe.
	checkDockerfile(t, filepath.Join(root, "Dockerfile"), healthCheck[1:])
}

// checkDockerfile checks that the Dockerfile at path has a HEALTHCHECK
// of CMD probe, and no # syntax= line.
func checkDockerfile(t *testing.T, path string, probe []string) {
	t.Helper()
	df, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(df), "\\\n", " ")
	m := regexp.MustCompile(`(?m)^HEALTHCHECK\b.*?\bCMD\s+(\[.*\])\s*$`).FindStringSubmatch(text)
	var cmd []string
	if m == nil || json.Unmarshal([]byte(m[1]), &cmd) != nil || !slices.Equal(cmd, probe) {
		t.Errorf("%s HEALTHCHECK: want CMD %q", path, probe)
	}
	if regexp.MustCompile(`(?mi)^#\s*syntax\s*=`).Match(df) {
		t.Errorf("%s has a # syntax= line: BuildKit would pull a frontend image for it", path)
	}
}

// portableServices reads the compose file at path, checks what every
// compose file of the repository keeps to, and returns its services,
// which must be want: only keys both docker compose v2 and docker-compose
// 1.27+ read (no `version`, no v2-only keys or YAML tags), and services
// with an image CI can swap, a health check and a restart policy.
func portableServices(t *testing.T, path string, want []string) map[string]any {
	t.Helper()
	raw, base := readYAML(t, path)
	name := filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path)
	for k := range base {
		switch {
		case k == "services", k == "volumes", k == "networks", strings.HasPrefix(k, "x-"):
		default:
			// `version` is obsolete in v2 (a warning) and pins 1.29 to an
			// older format; `name`, `include` and friends are v2-only.
			t.Errorf("%s: top-level key %q: keep to services, volumes, networks and x-* so that v2 and 1.29 agree", name, k)
		}
	}
	for _, tag := range []string{"!reset", "!override"} {
		if bytes.Contains(raw, []byte(tag)) {
			t.Errorf("%s uses the YAML tag %s, which only compose v2 understands", name, tag)
		}
	}

	services := mapAt(t, base, "services")
	want = slices.Sorted(slices.Values(want))
	if got := sortedKeys(services); !slices.Equal(got, want) {
		t.Errorf("%s: services = %v, want %v", name, got, want)
	}
	imageRE := regexp.MustCompile(`^\$\{[A-Z][A-Z0-9_]*:-[^}]+\}$`)
	for svcName, v := range services {
		svc, _ := v.(map[string]any)
		if img, _ := svc["image"].(string); !imageRE.MatchString(img) {
			t.Errorf("%s: %s: image %q, want ${VAR:-default} so that CI can swap it", name, svcName, img)
		}
		if hc, _ := svc["healthcheck"].(map[string]any); hc == nil || hc["test"] == nil {
			t.Errorf("%s: %s: no healthcheck: depends_on conditions and docker ps need one", name, svcName)
		}
		if svc["restart"] != "unless-stopped" {
			t.Errorf("%s: %s: restart = %v, want unless-stopped", name, svcName, svc["restart"])
		}
	}
	return services
}

// TestCompose_Config validates the files, examples/orders' too, with the
// compose tools present: docker-compose (1.29 on Debian 12) and the
// docker compose v2 plugin.
func TestCompose_Config(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	tools := composeTools()
	if len(tools) == 0 {
		skipOrFail(t, "neither docker-compose nor the docker compose v2 plugin is installed (apt-get install docker-compose)")
	}
	if !slices.ContainsFunc(tools, func(c []string) bool { return len(c) > 1 }) {
		t.Log("docker compose v2 plugin not installed: v2 compatibility is covered by TestComposeFile_Portable only")
	}
	// Each run is a second of docker-compose's Python starting up, and
	// they share nothing: side by side.
	for _, tool := range tools {
		t.Run(filepath.Base(strings.Join(tool, " ")), func(t *testing.T) {
			t.Parallel()
			t.Log(toolVersion(tool))
			for name, files := range map[string][]string{
				"alone":            {"docker-compose.yml"},
				"with_CI_override": {"docker-compose.yml", ".ci/compose.override.yml"},
				"orders":           {"examples/orders/docker-compose.yml"},
			} {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					args := slices.Clone(tool[1:])
					for _, f := range files {
						args = append(args, "-f", f)
					}
					args = append(args, "config", "-q")
					c := exec.Command(tool[0], args...)
					c.Dir = root
					c.Env = append(os.Environ(), "IDGEN_IMAGE=", "POSTGRES_IMAGE=", "MYSQL_IMAGE=", "REDIS_IMAGE=", "ORDERS_IMAGE=")
					if out, err := c.CombinedOutput(); err != nil {
						t.Fatalf("%s: %v\n%s", strings.Join(c.Args, " "), err, out)
					}
				})
			}
		})
	}
}

// TestCompose_Stack runs docker-compose.yml with the CI override: the
// databases from the offline images, idgen from a scratch image of the
// binary. It waits until all five containers are healthy, takes IDs from
// the three instances concurrently, checks them, and stops one instance
// to see SIGTERM handled as PID 1.
func TestCompose_Stack(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: the compose stack takes about a minute")
	}
	tool := requireStackTools(t)
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	t0 := time.Now()
	if _, err := buildImage(ctx, root, ".ci/compose-image.sh", "idgen:ci"); err != nil {
		t.Fatal(err)
	}
	t.Logf("image idgen:ci built in %.1fs", time.Since(t0).Seconds())

	ports := testkit.FreePorts(t, len(idgenServices))
	token := randomHex(t, 16)
	s := &stack{
		tool:     tool,
		dir:      root,
		files:    []string{"docker-compose.yml", ".ci/compose.override.yml"},
		services: 2 + len(idgenServices),
		project:  "idgen-ci-" + randomHex(t, 4),
		env: append(os.Environ(),
			"IDGEN_PUBLISH_ADDR=127.0.0.1",
			"IDGEN_ADMIN_TOKEN="+token,
			"POSTGRES_IMAGE="+pickImage(ctx, "IDGEN_TEST_POSTGRES_IMAGE", "idgen-test/postgres:15", "postgres:17-alpine"),
			"MYSQL_IMAGE="+pickImage(ctx, "IDGEN_TEST_MYSQL_IMAGE", "idgen-test/mysql:10.11", "mysql:8.4"),
		),
		urls: map[string]string{},
	}
	for i, svc := range idgenServices {
		s.env = append(s.env, fmt.Sprintf("%s=%d", svc.portVar, ports[i]))
		s.urls[svc.name] = fmt.Sprintf("http://127.0.0.1:%d", ports[i])
	}
	t.Logf("project %s: 5 containers healthy and /readyz 200 on 3 instances %.1fs after up", s.project, s.up(ctx, t).Seconds())

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	api := &apiClient{client: client, token: token}

	// The health probe must be able to fail, or every container would be
	// "healthy" whatever it serves.
	if out, err := s.compose(ctx, "exec", "-T", "idgen-segment", "/idgen", "health", "--url", "http://127.0.0.1:9/readyz"); err == nil {
		t.Errorf("idgen health against a closed port exited 0; want non-zero\n%s", out)
	}

	// Snowflake mode is on where compose says so.
	var segs struct {
		Mode      string `json:"mode"`
		Snowflake *struct {
			WorkerID int64  `json:"worker_id"`
			Ready    bool   `json:"ready"`
			Error    string `json:"error"`
		} `json:"snowflake"`
	}
	if err := api.do(ctx, http.MethodGet, s.urls["idgen-snowflake"]+"/admin/segments", nil, http.StatusOK, &segs); err != nil {
		t.Fatal(err)
	}
	if segs.Mode != "snowflake" {
		t.Fatalf("idgen-snowflake: /admin/segments mode = %q, want snowflake", segs.Mode)
	}
	if segs.Snowflake != nil && !segs.Snowflake.Ready {
		t.Fatalf("idgen-snowflake: worker not ready: %s", segs.Snowflake.Error)
	}

	const tag, start, step = "deploy", 1, 100
	for _, inst := range []string{"idgen-segment", "idgen-mysql"} {
		body := fmt.Sprintf(`{"tag":%q,"step":%d,"start":%d,"description":"deploy/compose_test.go"}`, tag, step, start)
		if err := api.do(ctx, http.MethodPost, s.urls[inst]+"/admin/tags", strings.NewReader(body), http.StatusCreated, nil); err != nil {
			t.Fatal(err)
		}
	}

	// Each instance gets clients×requests requests of count IDs. The
	// snowflake instance alternates between its /id (snowflake IDs) and
	// /segment (the PostgreSQL sequence idgen-segment also draws from).
	const clients, requests, count = 8, 200, 10
	type stream struct{ seq, inst, path string }
	plans := map[string][]stream{
		"idgen-segment":   {{"postgres", "idgen-segment", "/id/" + tag}},
		"idgen-snowflake": {{"postgres", "idgen-snowflake", "/segment/" + tag}, {"snowflake", "idgen-snowflake", "/id/" + tag}},
		"idgen-mysql":     {{"mysql", "idgen-mysql", "/id/" + tag}},
	}
	var (
		mu      sync.Mutex
		got     = map[stream][]int64{}
		nErr    int
		errList []string
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if nErr++; len(errList) < 5 {
			errList = append(errList, err.Error())
		}
	}
	t0 = time.Now()
	for inst, streams := range plans {
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mine := map[stream][]int64{}
				for r := range requests {
					st := streams[r%len(streams)]
					var resp struct {
						IDs []string `json:"ids"`
					}
					err := api.do(ctx, http.MethodGet, fmt.Sprintf("%s%s?count=%d", s.urls[inst], st.path, count), nil, http.StatusOK, &resp)
					if err == nil && len(resp.IDs) != count {
						err = fmt.Errorf("%s %s: %d IDs, want %d", inst, st.path, len(resp.IDs), count)
					}
					if err != nil {
						fail(err)
						continue
					}
					for _, v := range resp.IDs {
						id, err := strconv.ParseInt(v, 10, 64)
						if err != nil {
							fail(fmt.Errorf("%s %s: ID %q: %v", inst, st.path, v, err))
							continue
						}
						if prev := mine[st]; len(prev) > 0 && id <= prev[len(prev)-1] {
							fail(fmt.Errorf("%s %s client %d: ID %d after %d: not increasing", inst, st.path, c, id, prev[len(prev)-1]))
						}
						mine[st] = append(mine[st], id)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				for st, ids := range mine {
					got[st] = append(got[st], ids...)
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if nErr > 0 {
		t.Errorf("%d failed requests or bad IDs; first: %s", nErr, strings.Join(errList, "; "))
	}

	total := 0
	for st, ids := range got {
		total += len(ids)
		t.Logf("%-15s %-16s %6d IDs, %d..%d", st.inst, st.path, len(ids), slices.Min(ids), slices.Max(ids))
	}
	t.Logf("%d IDs in %d requests over %d clients in %.2fs (%.0f IDs/s through the published ports)",
		total, total/count, clients*len(plans), elapsed.Seconds(), float64(total)/elapsed.Seconds())

	// Uniqueness within each sequence, and bounds from the database.
	bySeq := map[string][]int64{}
	for st, ids := range got {
		bySeq[st.seq] = append(bySeq[st.seq], ids...)
	}
	for _, seq := range []string{"postgres", "snowflake", "mysql"} {
		ids := bySeq[seq]
		want := clients * requests * count
		switch seq {
		case "postgres":
			want += clients * requests * count / 2
		case "snowflake":
			want /= 2
		}
		dups := segmenttest.Duplicates(ids)
		t.Logf("sequence %-9s: %6d IDs, %d duplicates", seq, len(ids), dups)
		if len(ids) != want || dups != 0 {
			t.Errorf("sequence %s: %d IDs with %d duplicates, want %d unique", seq, len(ids), dups, want)
		}
	}

	// Both PostgreSQL consumers report the same row, and every ID they
	// handed out lies below its max_id: one sequence, not two.
	pgNext := nextID(ctx, t, api, s.urls["idgen-segment"], tag)
	if n := nextID(ctx, t, api, s.urls["idgen-snowflake"], tag); n != pgNext {
		t.Errorf("next_id of %s: %d on idgen-segment, %d on idgen-snowflake: not one database", tag, pgNext, n)
	}
	checkRange(t, "postgres", bySeq["postgres"], start, pgNext)
	checkRange(t, "mysql", bySeq["mysql"], start, nextID(ctx, t, api, s.urls["idgen-mysql"], tag))

	// Snowflake IDs decode to now and to the instance's leased worker.
	if ids := bySeq["snowflake"]; len(ids) > 0 {
		var d struct {
			UnixMS   int64 `json:"unix_ms"`
			WorkerID int64 `json:"worker_id"`
		}
		id := slices.Max(ids)
		if err := api.do(ctx, http.MethodGet, fmt.Sprintf("%s/snowflake/decode/%d", s.urls["idgen-snowflake"], id), nil, http.StatusOK, &d); err != nil {
			t.Error(err)
		} else {
			if age := time.Since(time.UnixMilli(d.UnixMS)); age < -time.Minute || age > 5*time.Minute {
				t.Errorf("snowflake ID %d decodes to %v, %v from now", id, time.UnixMilli(d.UnixMS), age)
			}
			if segs.Snowflake != nil && d.WorkerID != segs.Snowflake.WorkerID {
				t.Errorf("snowflake ID %d has worker %d, the instance reports worker %d", id, d.WorkerID, segs.Snowflake.WorkerID)
			}
			t.Logf("snowflake: IDs of worker %d", d.WorkerID)
		}
	}
	// Every instance leases a worker ID (serve's --snowflake is on by
	// default): the two sharing PostgreSQL must hold different ones.
	var other struct {
		Snowflake *struct {
			WorkerID int64 `json:"worker_id"`
		} `json:"snowflake"`
	}
	if err := api.do(ctx, http.MethodGet, s.urls["idgen-segment"]+"/admin/segments", nil, http.StatusOK, &other); err != nil {
		t.Error(err)
	} else if segs.Snowflake != nil && other.Snowflake != nil {
		if segs.Snowflake.WorkerID == other.Snowflake.WorkerID {
			t.Errorf("idgen-segment and idgen-snowflake both hold worker ID %d of one database", other.Snowflake.WorkerID)
		}
		t.Logf("worker IDs leased from PostgreSQL: idgen-snowflake %d, idgen-segment %d", segs.Snowflake.WorkerID, other.Snowflake.WorkerID)
	}

	// docker stop: SIGTERM to /idgen as PID 1 must drain and exit 0 well
	// within stop_grace_period, not be killed at its end.
	state, stopped := s.stop(ctx, t, "idgen-segment")
	logs, _ := s.compose(ctx, "logs", "--no-color", "idgen-segment")
	if state != "0" || stopped >= 15*time.Second || !strings.Contains(logs, "msg=stopped") {
		t.Errorf("idgen-segment: stop took %v, exit code %s, logged msg=stopped: %v; want a clean SIGTERM exit",
			stopped.Round(time.Millisecond), state, strings.Contains(logs, "msg=stopped"))
	}
	// The hand-back succeeds only if no one reserved past the range, so
	// it may hand back nothing here.
	after := nextID(ctx, t, api, s.urls["idgen-snowflake"], tag)
	t.Logf("idgen-segment stopped by SIGTERM in %.2fs, exit code %s; next_id of %s %d → %d (%d IDs handed back)",
		stopped.Seconds(), state, tag, pgNext, after, pgNext-after)
}

func checkRange(t *testing.T, seq string, ids []int64, start, next int64) {
	t.Helper()
	if len(ids) == 0 {
		return
	}
	lo, hi := slices.Min(ids), slices.Max(ids)
	if lo < start || hi >= next {
		t.Errorf("sequence %s: IDs %d..%d outside [%d, next_id %d)", seq, lo, hi, start, next)
	}
	t.Logf("sequence %-9s: IDs %d..%d within [%d, next_id %d)", seq, lo, hi, start, next)
}

func nextID(ctx context.Context, t *testing.T, api *apiClient, base, tag string) int64 {
	t.Helper()
	var resp struct {
		Tags []struct {
			Tag    string `json:"tag"`
			NextID string `json:"next_id"`
		} `json:"tags"`
	}
	if err := api.do(ctx, http.MethodGet, base+"/admin/tags", nil, http.StatusOK, &resp); err != nil {
		t.Fatal(err)
	}
	for _, tg := range resp.Tags {
		if tg.Tag == tag {
			n, err := strconv.ParseInt(tg.NextID, 10, 64)
			if err != nil {
				t.Fatalf("%s/admin/tags: next_id %q: %v", base, tg.NextID, err)
			}
			return n
		}
	}
	t.Fatalf("%s/admin/tags: no tag %s", base, tag)
	return 0
}

// apiClient calls idgen's HTTP API with the admin token.
type apiClient struct {
	client *http.Client
	token  string
}

// do sends the request and decodes the JSON answer into out (when not
// nil); any status but want is an error that quotes the body.
func (a *apiClient) do(ctx context.Context, method, url string, body io.Reader, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s, want %d: %s", method, url, resp.Status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: %w: %s", method, url, err, b)
		}
	}
	return nil
}

// stack is one compose project: docker-compose.yml and the CI override,
// or examples/orders/docker-compose.yml.
type stack struct {
	tool     []string // {"docker-compose"} or {"docker", "compose"}
	dir      string
	files    []string // relative to dir; the first one's directory is the project's
	services int      // containers the project runs
	project  string
	env      []string
	urls     map[string]string // service → http://127.0.0.1:PORT, whose /readyz must answer 200
}

func (s *stack) compose(ctx context.Context, args ...string) (string, error) {
	full := slices.Clone(s.tool[1:])
	for _, f := range s.files {
		full = append(full, "-f", f)
	}
	full = append(full, "-p", s.project)
	c := exec.CommandContext(ctx, s.tool[0], append(full, args...)...)
	c.Dir, c.Env = s.dir, s.env
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w\n%s", strings.Join(c.Args, " "), err, out)
	}
	return string(out), nil
}

// inspect formats the container of service with docker inspect.
func (s *stack) inspect(ctx context.Context, service, format string) (string, error) {
	id, err := s.compose(ctx, "ps", "-a", "-q", service)
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "docker", "inspect", "--format", format, strings.TrimSpace(id)).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker inspect %s: %w\n%s", service, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// up starts the stack from its images, and takes it down when the test
// ends; it returns how long the containers took to be healthy.
func (s *stack) up(ctx context.Context, t *testing.T) time.Duration {
	t.Helper()
	t.Cleanup(func() { s.down(t) })
	t0 := time.Now()
	if _, err := s.compose(ctx, "up", "-d", "--no-build"); err != nil {
		t.Fatal(err)
	}
	if err := s.waitHealthy(ctx, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	return time.Since(t0)
}

// stop stops service as docker stop does (SIGTERM, SIGKILL after 15 s)
// and returns its exit code and how long it took.
func (s *stack) stop(ctx context.Context, t *testing.T, service string) (code string, took time.Duration) {
	t.Helper()
	t0 := time.Now()
	if _, err := s.compose(ctx, "stop", "-t", "15", service); err != nil {
		t.Fatal(err)
	}
	took = time.Since(t0)
	code, err := s.inspect(ctx, service, "{{.State.ExitCode}}")
	if err != nil {
		t.Fatal(err)
	}
	return code, took
}

// waitHealthy waits until every container reports healthy and every
// service in s.urls answers /readyz with 200. A container that exits or restarts
// fails at once: with restart: unless-stopped a crash would otherwise
// just loop until the timeout.
func (s *stack) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	var last string
	for {
		status, err := s.status(ctx)
		switch {
		case err != nil:
			last = err.Error()
		case len(status) != s.services:
			last = fmt.Sprintf("containers: %v", status)
		default:
			ready := true
			for svc, st := range status {
				if st.restarts > 0 || st.state == "exited" || st.state == "dead" {
					return fmt.Errorf("%s %s after %d restarts: it crashed, see the logs", svc, st.state, st.restarts)
				}
				ready = ready && st.health == "healthy"
			}
			last = fmt.Sprintf("containers: %v", status)
			if ready {
				for svc, u := range s.urls {
					resp, err := client.Get(u + "/readyz")
					if err != nil {
						ready, last = false, fmt.Sprintf("%s: %v", svc, err)
						break
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						ready, last = false, fmt.Sprintf("%s: /readyz %s", svc, resp.Status)
						break
					}
				}
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stack not healthy within %v; last: %s", timeout, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

type containerStatus struct {
	state, health string
	restarts      int
}

func (st containerStatus) String() string {
	return fmt.Sprintf("%s/%s/restarts=%d", st.state, st.health, st.restarts)
}

// status reports the containers of the project by service.
func (s *stack) status(ctx context.Context) (map[string]containerStatus, error) {
	out, err := s.compose(ctx, "ps", "-a", "-q") // -a: v2 leaves out exited containers
	if err != nil {
		return nil, err
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return nil, errors.New("no containers yet")
	}
	args := append([]string{"inspect", "--format",
		`{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}} {{.RestartCount}}`}, ids...)
	b, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("docker inspect: %w: %s", err, b)
	}
	res := map[string]containerStatus{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			return nil, fmt.Errorf("docker inspect: odd line %q", line)
		}
		n, _ := strconv.Atoi(f[3])
		res[f[0]] = containerStatus{state: f[1], health: f[2], restarts: n}
	}
	return res, nil
}

// down prints the logs when the test failed, then removes the project's
// containers, network and volumes.
func (s *stack) down(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if t.Failed() {
		if status, err := s.status(ctx); err == nil {
			t.Logf("containers at failure: %v", status)
		}
		out, _ := s.compose(ctx, "logs", "--no-color", "--tail=60")
		t.Logf("%s logs (last 60 lines per service):\n%s", s.project, out)
	}
	if out, err := s.compose(ctx, "down", "-v", "--remove-orphans", "-t", "15"); err != nil {
		t.Errorf("cleanup: %v\n%s", err, out)
	}
}

// requireStackTools returns the compose command to run the stack with, or
// skips (fails under CI or IDGEN_REQUIRE_DOCKER=1) naming what is missing.
func requireStackTools(t *testing.T) []string {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("docker"); err != nil {
		missing = append(missing, "the docker CLI")
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
			missing = append(missing, fmt.Sprintf("a reachable Docker engine (docker info: %v: %s)", err, bytes.TrimSpace(out)))
		}
	}
	tools := composeTools()
	if len(tools) == 0 {
		missing = append(missing, "docker-compose (apt-get install docker-compose) or the docker compose v2 plugin")
	}
	if len(missing) > 0 {
		skipOrFail(t, "compose stack test needs "+strings.Join(missing, " and "))
	}
	t.Logf("compose tool: %s", toolVersion(tools[0]))
	return tools[0]
}

// composeTools lists the compose commands installed: docker-compose
// first (what CI installs), then the v2 plugin.
func composeTools() [][]string {
	var tools [][]string
	if p, err := exec.LookPath("docker-compose"); err == nil {
		tools = append(tools, []string{p})
	}
	if _, err := exec.LookPath("docker"); err == nil {
		if exec.Command("docker", "compose", "version").Run() == nil {
			tools = append(tools, []string{"docker", "compose"})
		}
	}
	return tools
}

func toolVersion(tool []string) string {
	out, err := exec.Command(tool[0], append(slices.Clone(tool[1:]), "version", "--short")...).Output()
	if err != nil {
		return strings.Join(tool, " ")
	}
	return strings.Join(tool, " ") + " " + strings.TrimSpace(string(out))
}

func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	dbtest.Missing(t, msg)
}

// pickImage: the image named by env, else the offline image when it
// exists locally, else the official one (pulled by compose).
func pickImage(ctx context.Context, env, offline, official string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	if exec.CommandContext(ctx, "docker", "image", "inspect", offline).Run() == nil {
		return offline
	}
	return official
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Dir(filepath.Dir(file))
}

func readYAML(t *testing.T, path string) ([]byte, map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return raw, m
}

// mapAt returns m[key] as a map, failing the test when it is not one.
func mapAt(t *testing.T, m map[string]any, key string) map[string]any {
	t.Helper()
	v, ok := m[key].(map[string]any)
	if !ok {
		t.Fatalf("%s: want a mapping, got %T", key, m[key])
	}
	return v
}

func stringsOf(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
