// Package dbtest gives integration tests a real PostgreSQL or MySQL
// server. By default it starts one in a container through
// testcontainers-go; IDGEN_TEST_POSTGRES_DSN or IDGEN_TEST_MYSQL_DSN point
// the tests at an existing server instead.
//
// Images default to postgres:17-alpine and mysql:8.4 and are overridden by
// IDGEN_TEST_POSTGRES_IMAGE and IDGEN_TEST_MYSQL_IMAGE (CI builds offline
// stand-ins, see .ci/docker-images.sh). Readiness is checked with a real
// SQL ping (wait.ForSQL), which works for any image that speaks the
// protocol, unlike log-line waits.
//
// Without Docker the tests skip with one message, unless CI or
// IDGEN_REQUIRE_DOCKER=1 is set: then a missing Docker fails them.
package dbtest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	// Drivers for wait.ForSQL.
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Kind is a database product.
type Kind struct {
	Name         string // "postgres" or "mysql"
	defaultImage string
	imageEnv     string
	dsnEnv       string
	port         string
	env          map[string]string
	driver       string
	sqlURL       func(host, port string) string // for wait.ForSQL
	dsn          func(host, port string) string // for idgen
}

// The supported kinds.
var (
	Postgres = Kind{
		Name: "postgres", defaultImage: "postgres:17-alpine",
		imageEnv: "IDGEN_TEST_POSTGRES_IMAGE", dsnEnv: "IDGEN_TEST_POSTGRES_DSN",
		port:   "5432/tcp",
		env:    map[string]string{"POSTGRES_USER": "idgen", "POSTGRES_PASSWORD": "secret", "POSTGRES_DB": "idgen"},
		driver: "pgx",
		sqlURL: func(h, p string) string {
			return fmt.Sprintf("postgres://idgen:secret@%s/idgen?sslmode=disable", net.JoinHostPort(h, p))
		},
		dsn: func(h, p string) string {
			return fmt.Sprintf("postgres://idgen:secret@%s/idgen?sslmode=disable", net.JoinHostPort(h, p))
		},
	}
	MySQL = Kind{
		Name: "mysql", defaultImage: "mysql:8.4",
		imageEnv: "IDGEN_TEST_MYSQL_IMAGE", dsnEnv: "IDGEN_TEST_MYSQL_DSN",
		port: "3306/tcp",
		env: map[string]string{"MYSQL_ROOT_PASSWORD": "secret", "MYSQL_DATABASE": "idgen",
			"MYSQL_USER": "idgen", "MYSQL_PASSWORD": "secret"},
		driver: "mysql",
		sqlURL: func(h, p string) string { return fmt.Sprintf("idgen:secret@tcp(%s)/idgen", net.JoinHostPort(h, p)) },
		dsn:    func(h, p string) string { return fmt.Sprintf("mysql://idgen:secret@%s/idgen", net.JoinHostPort(h, p)) },
	}
)

// Server is a database server for one test.
type Server struct {
	// DSN is the URL idgen's --store flag takes.
	DSN       string
	container testcontainers.Container // nil for an external server
}

// Start returns a server of kind k: the external one named by k's DSN
// variable, or a new container that is removed when the test ends.
func Start(t testing.TB, k Kind) *Server {
	t.Helper()
	if dsn := os.Getenv(k.dsnEnv); dsn != "" {
		return &Server{DSN: isolate(t, k, dsn)}
	}
	return StartContainer(t, k)
}

// Option changes the container request before it starts, for tests that
// need server options (Cmd) or files (Files) of their own.
type Option func(*testcontainers.ContainerRequest)

// StartContainer always starts a new container, for tests that must stop
// and start the server. The container's port is published on a fixed
// loopback port, so the DSN stays valid across a restart.
func StartContainer(t testing.TB, k Kind, opts ...Option) *Server {
	t.Helper()
	return startContainer(t, k, opts...)
}

// StartOnNetwork is StartContainer with the container also attached to
// the Docker network named network under alias, for tests whose other
// containers reach the database by that name. It returns the server and
// the DSN for those containers (host alias, the container's own port).
func StartOnNetwork(t testing.TB, k Kind, network, alias string) (*Server, string) {
	t.Helper()
	s := startContainer(t, k, func(req *testcontainers.ContainerRequest) {
		req.Networks = []string{network}
		req.NetworkAliases = map[string][]string{network: {alias}}
	})
	port, _, _ := strings.Cut(k.port, "/")
	return s, k.dsn(alias, port)
}

func startContainer(t testing.TB, k Kind, opts ...Option) *Server {
	t.Helper()
	requireDocker(t)
	image := k.defaultImage
	if v := os.Getenv(k.imageEnv); v != "" {
		image = v
	}
	hostPort := FreePorts(t, 1)[0]
	ctx := context.Background()
	req := testcontainers.ContainerRequest{
		Image:        image,
		Env:          k.env,
		ExposedPorts: []string{k.port},
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{network.MustParsePort(k.port): {{
				HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(hostPort),
			}}}
		},
		WaitingFor: wait.ForSQL(k.port, k.driver, func(host string, p network.Port) string {
			return k.sqlURL(host, p.Port())
		}).WithStartupTimeout(2 * time.Minute).WithPollInterval(250 * time.Millisecond),
	}
	for _, o := range opts {
		o(&req)
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	if c != nil {
		t.Cleanup(func() { _ = testcontainers.TerminateContainer(c) })
	}
	if err != nil {
		t.Fatalf("start %s container from image %s: %v (set %s to use another image, or %s to use an existing server)",
			k.Name, image, err, k.imageEnv, k.dsnEnv)
	}
	return &Server{DSN: k.dsn("127.0.0.1", strconv.Itoa(hostPort)), container: c}
}

// Stop stops the server's container, as an outage would.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if s.container == nil {
		t.Fatal("dbtest: Stop needs a container, not an external server")
	}
	d := 10 * time.Second
	if err := s.container.Stop(context.Background(), &d); err != nil {
		t.Fatalf("stop container: %v", err)
	}
}

// Restart starts the stopped container again and waits until it answers
// SQL.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.container.Start(context.Background()); err != nil {
		t.Fatalf("start container: %v", err)
	}
}

// Pause freezes every process of the server's container (docker pause),
// as a hung server or a partition that drops nothing would: the kernel
// still accepts connections and takes the bytes sent, but no query is
// answered, so clients wait until their own timeouts. It unpauses the
// container when the test ends if Unpause was not called, so that it can
// be removed.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	if s.container == nil {
		t.Fatal("dbtest: Pause needs a container, not an external server")
	}
	if err := s.dockerCall(func(ctx context.Context, c client.APIClient, id string) error {
		_, err := c.ContainerPause(ctx, id, client.ContainerPauseOptions{})
		return err
	}); err != nil {
		t.Fatalf("pause container: %v", err)
	}
	t.Cleanup(func() {
		// Harmless when already unpaused: the error is ignored.
		_ = s.dockerCall(func(ctx context.Context, c client.APIClient, id string) error {
			_, err := c.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
			return err
		})
	})
}

// Unpause resumes a server frozen by Pause. Connections opened or used
// meanwhile get their answers, late.
func (s *Server) Unpause(t testing.TB) {
	t.Helper()
	if s.container == nil {
		t.Fatal("dbtest: Unpause needs a container, not an external server")
	}
	if err := s.dockerCall(func(ctx context.Context, c client.APIClient, id string) error {
		_, err := c.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
		return err
	}); err != nil {
		t.Fatalf("unpause container: %v", err)
	}
}

// dockerCall runs fn with a client of the Docker engine the container
// runs on.
func (s *Server) dockerCall(fn func(ctx context.Context, c client.APIClient, id string) error) error {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return fn(ctx, p.Client(), s.container.GetContainerID())
}

// Container returns the container, or nil for an external server.
func (s *Server) Container() testcontainers.Container { return s.container }

// Required reports whether what the integration tests need from outside
// the module (Docker, Debian's servers and tools) must be there: CI or
// IDGEN_REQUIRE_DOCKER=1 is set, as .ci/run sets CI. Then a missing one
// fails the test instead of skipping it, so that CI never passes by
// skipping.
func Required() bool {
	return os.Getenv("CI") != "" || os.Getenv("IDGEN_REQUIRE_DOCKER") == "1"
}

// Missing skips t because something it needs is missing, which msg
// names with how to get it, or fails it where that is Required.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s (required here: CI or IDGEN_REQUIRE_DOCKER=1 is set)", msg)
	}
	t.Skip(msg)
}

// RequireDocker skips the test without a Docker engine, or fails it when
// CI or IDGEN_REQUIRE_DOCKER=1 says Docker must be there.
func RequireDocker(t testing.TB) {
	t.Helper()
	requireDocker(t)
}

func requireDocker(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Docker (a database container): skipped under -short")
	}
	err := dockerHealthy()
	if err == nil {
		return
	}
	Missing(t, fmt.Sprintf("no Docker engine reachable (%v); start Docker, or set IDGEN_TEST_POSTGRES_DSN / IDGEN_TEST_MYSQL_DSN", err))
}

func dockerHealthy() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("docker client: %v", r)
		}
	}()
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Health(ctx)
}

// External reports whether tests of kind k use an existing server.
func External(k Kind) bool { return os.Getenv(k.dsnEnv) != "" }

// FreePorts returns n distinct loopback ports that were free a moment
// ago. Each is held until all are picked, so that they differ; a process
// started on one may still lose it to another, which the caller's start
// then reports.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var lc net.ListenConfig
	ports := make([]int, 0, n)
	for range n {
		l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
