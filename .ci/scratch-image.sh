#!/usr/bin/env bash
# .ci/scratch-image.sh: sourced by .ci/compose-image.sh and
# .ci/orders-image.sh, which build images without a registry: the real
# Dockerfiles' golang and distroless base images cannot be pulled here, so
# a static binary is built on the host and copied FROM scratch by the
# classic builder, which pulls nothing.
#
# scratch_image TAG LABEL PKG BIN: builds the Go package PKG as BIN for the
# Docker engine's platform and the image TAG, labelled LABEL, from the
# Dockerfile lines on stdin, whose context holds BIN and an empty data/.
# Prints TAG on stdout.
scratch_image() {
	local tag=$1 label=$2 pkg=$3 bin=$4 root ctx arch old new
	root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
	ctx="$(mktemp -d)"
	# For the engine's platform, not the host's: a Docker Desktop or
	# remote engine may run another OS or architecture. CGO_ENABLED=0, as
	# every build of CI's but -race: they share the cache (on a linux host
	# of the engine's architecture the explicit GOOS/GOARCH change nothing).
	if ! arch="$(docker version -f '{{.Server.Arch}}')" || [ -z "$arch" ]; then
		echo "$(basename "$0"): no Docker engine to build for" >&2
		rm -rf "$ctx"
		return 1
	fi
	if ! (cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -o "$ctx/$bin" "$pkg"); then
		rm -rf "$ctx"
		return 1
	fi
	mkdir "$ctx/data"
	{ cat; printf 'LABEL %s=1\n' "$label"; } >"$ctx/Dockerfile"
	old="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
	if ! DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >"$ctx/build.log" 2>&1; then
		cat "$ctx/build.log" >&2
		echo "$(basename "$0"): docker build of $tag failed" >&2
		rm -rf "$ctx"
		return 1
	fi
	rm -rf "$ctx"
	# The image this build took TAG from, if nothing else names it now.
	# Not a prune by label: the engine may be shared, and another run's
	# image can be untagged between its build and its `up`.
	new="$(docker image inspect -f '{{.Id}}' "$tag")"
	if [ -n "$old" ] && [ "$old" != "$new" ] &&
		[ "$(docker image inspect -f "{{len .RepoTags}} {{index .Config.Labels \"$label\"}}" "$old" 2>/dev/null)" = "0 1" ]; then
		docker image rm "$old" >/dev/null 2>&1 || true
	fi
	printf '%s\n' "$tag"
}
