#!/usr/bin/env bash
# .ci/orders-image.sh [TAG]: build the image TAG (default idgen-orders:ci)
# of examples/orders without a registry, as .ci/compose-image.sh does for
# idgen: examples/orders/Dockerfile's golang and distroless base images
# cannot be pulled here, so the static binary is built on the host and
# copied FROM scratch by the classic builder, which pulls nothing. Like
# the real image it runs as the non-root user 65532 on 0.0.0.0:8081 with
# the SQLite default in /data. deploy/orders_compose_test.go runs it as
# ORDERS_IMAGE in examples/orders/docker-compose.yml, under a tag of each
# run's own. The binary is built for the engine's platform.
# Prints TAG on stdout. Needs go and a Docker engine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tag="${1:-idgen-orders:ci}"
label=org.idgen.orders-ci-image

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
# For the engine's platform, not the host's: a Docker Desktop or remote
# engine may run another OS or architecture. CGO_ENABLED=0, as every
# build of CI's but -race: they share the cache (on a linux host of the
# engine's architecture the explicit GOOS/GOARCH change nothing).
if ! arch="$(docker version -f '{{.Server.Arch}}')" || [ -z "$arch" ]; then
	echo "$(basename "$0"): no Docker engine to build for" >&2
	exit 1
fi
(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -o "$ctx/orders" ./examples/orders)
mkdir "$ctx/data"
printf '%s\n' \
	'FROM scratch' \
	'COPY orders /orders' \
	'COPY --chown=65532:65532 data /data' \
	'ENV ORDERS_STORE=sqlite:///data/orders.db' \
	'ENV ORDERS_ADDR=0.0.0.0:8081' \
	'USER 65532:65532' \
	'EXPOSE 8081' \
	'ENTRYPOINT ["/orders"]' \
	"LABEL $label=1" >"$ctx/Dockerfile"
old="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
if ! DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >"$ctx/build.log" 2>&1; then
	cat "$ctx/build.log" >&2
	echo "orders-image.sh: docker build of $tag failed" >&2
	exit 1
fi
# The image this build took TAG from, if nothing else names it now. Not a
# prune by label: the engine may be shared, and another run's image can
# be untagged between its build and its `up` (deploy's test tags each
# run's image on its own and removes it after).
new="$(docker image inspect -f '{{.Id}}' "$tag")"
if [ -n "$old" ] && [ "$old" != "$new" ] &&
	[ "$(docker image inspect -f "{{len .RepoTags}} {{index .Config.Labels \"$label\"}}" "$old" 2>/dev/null)" = "0 1" ]; then
	docker image rm "$old" >/dev/null 2>&1 || true
fi
printf '%s\n' "$tag"
