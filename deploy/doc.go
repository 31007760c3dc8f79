// Package deploy holds the deployment tests: they check the files that
// ship idgen as containers (Dockerfile, docker-compose.yml and the CI
// override in .ci/) and run the compose stack for real, with PostgreSQL,
// MySQL and three idgen instances, over published loopback ports.
//
// The package has no code of its own; docs/deploy.md is the guide the
// tests back up. The stack test needs a Docker engine and docker-compose
// (1.27+) or the docker compose v2 plugin. Without them it skips, unless
// CI or IDGEN_REQUIRE_DOCKER=1 is set: then it fails.
package deploy
