// Package deploy holds the deployment tests: they check the files that
// ship idgen as containers (Dockerfile, docker-compose.yml and the CI
// override in .ci/) and run the compose stack for real, with PostgreSQL,
// MySQL and three idgen instances, over published loopback ports; and
// the same for the order example's stack (examples/orders: PostgreSQL,
// Redis and the order service), checked as a client would. The
// monitoring test checks that every metric the Prometheus rules
// (prometheus/) and the Grafana dashboard (grafana/) name is exported by
// a running server. The Kubernetes manifests (kubernetes/) are a module
// of their own with their own test.
//
// The package has no code of its own; docs/deploy.md is the guide the
// tests back up. The stack tests need a Docker engine and docker-compose
// (1.27+) or the docker compose v2 plugin. Without them it skips, unless
// CI or IDGEN_REQUIRE_DOCKER=1 is set: then it fails.
package deploy
