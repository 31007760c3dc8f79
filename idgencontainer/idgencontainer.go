// Package idgencontainer runs an idgen server in a Docker container for
// integration tests, in the style of the testcontainers-go modules:
//
//	ctr, err := idgencontainer.Run(ctx, "idgen:local",
//		idgencontainer.WithMode("snowflake"),
//		idgencontainer.WithStore("postgres://idgen:secret@postgres:5432/idgen?sslmode=disable"))
//	testcontainers.CleanupContainer(t, ctr) // nil-safe: also when Run failed
//	if err != nil {
//		t.Fatal(err)
//	}
//	c, err := ctr.Client(ctx)
//	if err != nil {
//		t.Fatal(err)
//	}
//	id, err := c.Next(ctx, "order") // the container's mode, here snowflake
//
// Run returns once /readyz answers 200, so the client it hands out can
// take IDs at once. Any testcontainers.ContainerCustomizer works beside
// this package's options (networks, log consumers, a startup timeout
// through testcontainers.WithWaitStrategyAndDeadline).
//
// The image is idgen's (see the Dockerfile): it keeps a SQLite store in
// /data unless WithStore names a shared database. For unit tests that
// need no container, see package idgentest.
package idgencontainer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/idgen/idgen/client"
	"github.com/idgen/idgen/server"
)

// port is the port idgen serve listens on inside the image.
const port = "8080/tcp"

// ErrInvalidOption is returned by Run when an option's value cannot work.
var ErrInvalidOption = errors.New("idgencontainer: invalid option")

// Container is a running idgen container.
type Container struct {
	testcontainers.Container
	adminToken string
}

// Run starts a container from img and waits until /readyz answers 200
// (at most a minute by default). On an error after the container was
// created it returns the container too, so that the caller can
// terminate it.
func Run(ctx context.Context, img string, opts ...testcontainers.ContainerCustomizer) (*Container, error) {
	all := append([]testcontainers.ContainerCustomizer{
		testcontainers.WithExposedPorts(port),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/readyz").WithPort(port).
			WithStartupTimeout(time.Minute).WithPollInterval(100 * time.Millisecond)),
	}, opts...)
	ctr, err := testcontainers.Run(ctx, img, all...)
	var c *Container
	if ctr != nil {
		c = &Container{Container: ctr}
	}
	if err != nil {
		return c, fmt.Errorf("idgencontainer: run %s: %w", img, err)
	}
	// The settings as the container got them, whichever option set them.
	info, err := ctr.Inspect(ctx)
	if err != nil {
		return c, fmt.Errorf("idgencontainer: inspect: %w", err)
	}
	for _, kv := range info.Config.Env {
		if v, ok := strings.CutPrefix(kv, "IDGEN_ADMIN_TOKEN="); ok {
			c.adminToken = v
		}
	}
	return c, nil
}

// WithMode sets what /id/{tag} serves: "segment" (the default) or
// "snowflake". Both /segment/{tag} and /snowflake/{tag} are served
// either way.
func WithMode(mode string) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		if mode != "segment" && mode != "snowflake" {
			return fmt.Errorf("%w: WithMode(%q): use segment or snowflake", ErrInvalidOption, mode)
		}
		return testcontainers.WithEnv(map[string]string{"IDGEN_MODE": mode})(req)
	}
}

// WithAdminToken sets the bearer token of /admin/*, at least
// server.MinTokenLength characters. Without one the admin API answers 403.
func WithAdminToken(token string) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		if len(token) < server.MinTokenLength {
			return fmt.Errorf("%w: WithAdminToken: the token must be at least %d characters", ErrInvalidOption, server.MinTokenLength)
		}
		return testcontainers.WithEnv(map[string]string{"IDGEN_ADMIN_TOKEN": token})(req)
	}
}

// WithStore makes the server use the database at dsn (postgres://… or
// mysql://…), as reached from inside the container: on a shared Docker
// network, by the database container's alias. Several containers with
// one store share its tags and worker IDs, as a fleet does.
func WithStore(dsn string) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		if !strings.Contains(dsn, "://") {
			return fmt.Errorf("%w: WithStore(%q): want postgres://…, mysql://… or sqlite://PATH", ErrInvalidOption, dsn)
		}
		return testcontainers.WithEnv(map[string]string{"IDGEN_STORE": dsn})(req)
	}
}

// WithAutoCreate sets whether a tag is created on its first use (the
// default) or refused with 404 tag_not_found until it is created through
// POST /admin/tags.
func WithAutoCreate(on bool) testcontainers.CustomizeRequestOption {
	return testcontainers.WithEnv(map[string]string{"IDGEN_AUTO_CREATE_TAGS": strconv.FormatBool(on)})
}

// BaseURL returns the URL the host reaches the server at,
// http://HOST:PORT.
func (c *Container) BaseURL(ctx context.Context) (string, error) {
	u, err := c.PortEndpoint(ctx, port, "http")
	if err != nil {
		return "", fmt.Errorf("idgencontainer: %w", err)
	}
	return u, nil
}

// AdminToken returns the token /admin/* accepts, or "" without one.
func (c *Container) AdminToken() string { return c.adminToken }

// Client returns a client of the server. Its Next and NextN use
// /id/{tag}, the container's mode, as every client.Client does unless
// client.WithMode among opts picks another route.
func (c *Container) Client(ctx context.Context, opts ...client.Option) (*client.Client, error) {
	u, err := c.BaseURL(ctx)
	if err != nil {
		return nil, err
	}
	return client.New(u, opts...)
}
