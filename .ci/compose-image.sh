#!/usr/bin/env bash
# .ci/compose-image.sh [TAG]: build the image TAG (default idgen:ci) that
# .ci/compose.override.yml gives the idgen services, without a registry:
# the Dockerfile's golang and distroless base images cannot be pulled here,
# so the static binary is built on the host and copied FROM scratch by the
# classic builder, which pulls nothing. Like the real image it runs as the
# non-root user 65532 and starts `idgen serve` with the SQLite default in
# /data, so that idgencontainer's tests can run it without a database
# (the compose stack sets PostgreSQL/MySQL instead).
# Prints TAG on stdout. Needs go and a Docker engine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tag="${1:-idgen:ci}"
label=org.idgen.compose-ci-image

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
# For the engine's platform, not the host's: a Docker Desktop or remote
# engine may run another OS or architecture. On a linux host of the
# engine's architecture it is the same build as internal/proctest's, so
# that CI compiles it once.
if ! arch="$(docker version -f '{{.Server.Arch}}')" || [ -z "$arch" ]; then
	echo "$(basename "$0"): no Docker engine to build for" >&2
	exit 1
fi
(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -o "$ctx/idgen" ./cmd/idgen)
mkdir "$ctx/data"
printf '%s\n' \
	'FROM scratch' \
	'COPY idgen /idgen' \
	'COPY --chown=65532:65532 data /data' \
	'ENV IDGEN_STORE=sqlite:///data/idgen.db' \
	'USER 65532:65532' \
	'EXPOSE 8080' \
	'ENTRYPOINT ["/idgen"]' \
	'CMD ["serve"]' \
	"LABEL $label=1" >"$ctx/Dockerfile"
if ! DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >"$ctx/build.log" 2>&1; then
	cat "$ctx/build.log" >&2
	echo "compose-image.sh: docker build of $tag failed" >&2
	exit 1
fi
# Earlier builds of this script that lost their tag to this one.
docker image prune -f --filter "label=$label" >/dev/null 2>&1 || true
printf '%s\n' "$tag"
