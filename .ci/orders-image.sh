#!/usr/bin/env bash
# .ci/orders-image.sh [TAG]: build the image TAG (default idgen-orders:ci)
# of examples/orders without a registry, as .ci/compose-image.sh does for
# idgen: examples/orders/Dockerfile's golang and distroless base images
# cannot be pulled here, so the static binary is built on the host and
# copied FROM scratch by the classic builder, which pulls nothing. Like
# the real image it runs as the non-root user 65532 on 0.0.0.0:8081 with
# the SQLite default in /data. deploy/orders_compose_test.go runs it as
# ORDERS_IMAGE in examples/orders/docker-compose.yml.
# Prints TAG on stdout. Needs go and a Docker engine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tag="${1:-idgen-orders:ci}"
label=org.idgen.orders-ci-image

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
# CGO_ENABLED=0, as every build of CI's but -race: they share the cache.
(cd "$root" && CGO_ENABLED=0 go build -o "$ctx/orders" ./examples/orders)
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
if ! DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >"$ctx/build.log" 2>&1; then
	cat "$ctx/build.log" >&2
	echo "orders-image.sh: docker build of $tag failed" >&2
	exit 1
fi
# Earlier builds of this script that lost their tag to this one.
docker image prune -f --filter "label=$label" >/dev/null 2>&1 || true
printf '%s\n' "$tag"
