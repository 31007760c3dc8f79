#!/usr/bin/env bash
# .ci/docker-images.sh: provide a Docker engine and the PostgreSQL / MySQL
# (MariaDB) / Redis test images on a Debian 12 machine that can reach no
# container registry (only Debian's apt archive).
#
#   bash .ci/docker-images.sh     # run: prints KEY=VALUE lines (stdout)
#   . .ci/docker-images.sh        # source (bash): the same, and exports them
#
# Steps (each skipped when already done, so a second run takes seconds):
#   1. apt-get install docker.io mmdebstrap        (when dockerd/mmdebstrap are missing)
#   2. start dockerd in the background             (when `docker info` fails)
#   3. mmdebstrap a bookworm rootfs with postgresql + mariadb-server +
#      redis-server and `docker import` it as $IDGEN_TEST_BASE_IMAGE (when
#      that image is missing)
#   4. build the three test images FROM it (classic builder, nothing pulled),
#      each with its entrypoint from .ci/images/ (when missing, or when the
#      entrypoint script or the base image changed: a label records both)
# Progress and timings go to stderr; on success stdout gets exactly:
#   TESTCONTAINERS_RYUK_DISABLED=true
#   TESTCONTAINERS_HOST_OVERRIDE=localhost
#   IDGEN_TEST_POSTGRES_IMAGE=idgen-test/postgres:15
#   IDGEN_TEST_MYSQL_IMAGE=idgen-test/mysql:10.11
#   IDGEN_TEST_REDIS_IMAGE=idgen-test/redis:7
#   IDGEN_REQUIRE_DOCKER=1
#
# Knobs (environment): IDGEN_DEBIAN_MIRROR (default: the first mirror the
# machine's apt sources name for bookworm, see .ci/debian-mirror.sh; none is
# an error), IDGEN_ROOTFS_PARENT (default /var/tmp), DOCKERD_LOG (default
# /tmp/dockerd.log), IDGEN_TEST_BASE_IMAGE.
# Needs bash and root. Disk: ~1.5 GB while building, ~650 MB after.
# When sourced, the work runs in a child bash (its set -euo pipefail cannot
# leak into the caller); the function returns non-zero on failure.

_idgen_docker_images_env() {
	cat <<-'EOF'
		TESTCONTAINERS_RYUK_DISABLED=true
		TESTCONTAINERS_HOST_OVERRIDE=localhost
		IDGEN_TEST_POSTGRES_IMAGE=idgen-test/postgres:15
		IDGEN_TEST_MYSQL_IMAGE=idgen-test/mysql:10.11
		IDGEN_TEST_REDIS_IMAGE=idgen-test/redis:7
		IDGEN_REQUIRE_DOCKER=1
	EOF
}

# ---------------------------------------------------------------- sourced ---
if [ -n "${BASH_VERSION:-}" ] && [ "${BASH_SOURCE[0]:-$0}" != "$0" ]; then
	_idgen_docker_images_sourced() {
		local self line
		self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
		bash "$self" || { echo "docker-images.sh: FAILED (see above)" >&2; return 1; }
		while IFS= read -r line; do
			export "${line?}"
		done < <(_idgen_docker_images_env)
	}
	_idgen_docker_images_sourced
	_idgen_docker_images_rc=$?
	unset -f _idgen_docker_images_sourced _idgen_docker_images_env
	# shellcheck disable=SC2317 # return when sourced; exit covers odd cases
	return "$_idgen_docker_images_rc" 2>/dev/null || exit "$_idgen_docker_images_rc"
fi

# --------------------------------------------------------------- executed ---
set -Eeuo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PG_IMAGE=idgen-test/postgres:15
MYSQL_IMAGE=idgen-test/mysql:10.11
REDIS_IMAGE=idgen-test/redis:7
# Bump the tag when the rootfs recipe (suite, packages, trimming) changes.
# One rootfs for all three servers: redis-server adds a few MB to it,
# where a rootfs of its own would cost a second mmdebstrap.
BASE_IMAGE="${IDGEN_TEST_BASE_IMAGE:-idgen-test/base:bookworm-pg15-mariadb10.11-redis7-3}"
SUITE=bookworm
PACKAGES=postgresql,mariadb-server,redis-server
ROOTFS_PARENT="${IDGEN_ROOTFS_PARENT:-/var/tmp}"
DOCKERD_LOG="${DOCKERD_LOG:-/tmp/dockerd.log}"
export DEBIAN_FRONTEND=noninteractive

T0=$(date +%s.%N)
# since START: seconds elapsed, one decimal.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
log() { printf '[docker-images %6ss] %s\n' "$(since "$T0")" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
trap 'die "failed at line $LINENO: $BASH_COMMAND"' ERR

# phase NAME CMD...: run a step and report how long it took.
phase() {
	local name=$1 start
	shift
	start=$(date +%s.%N)
	log "== $name"
	"$@"
	log "== $name: done in $(since "$start") s"
}

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (installs packages, runs dockerd)"; }

# ------------------------------------------------------------- 1. install ---
install_packages() {
	if command -v docker >/dev/null && command -v dockerd >/dev/null && command -v mmdebstrap >/dev/null; then
		log "docker, dockerd and mmdebstrap present; nothing to install"
		return
	fi
	need_root
	apt-get update -qq
	# No recommends: they would bring needrestart (slow apt hooks), git, apparmor...
	apt-get install -y -qq --no-install-recommends \
		docker.io mmdebstrap >/dev/null
	command -v dockerd >/dev/null || die "dockerd still missing after apt-get install docker.io"
	log "installed: $(dockerd --version)"
}

# -------------------------------------------------------------- 2. dockerd ---
docker_up() { docker info >/dev/null 2>&1; }

# Pid of a running dockerd, if any (no procps needed).
dockerd_pid() {
	local d
	for d in /proc/[0-9]*; do
		if [ "$(cat "$d/comm" 2>/dev/null)" = dockerd ]; then
			printf '%s\n' "${d#/proc/}"
			return 0
		fi
	done
	return 1
}

start_dockerd() {
	if docker_up; then
		log "dockerd already answering (server $(docker version --format '{{.Server.Version}}'))"
		return
	fi
	need_root
	# A pid file left by a dockerd that no longer runs blocks a new one.
	local pidfile=/var/run/docker.pid pid
	if [ -s "$pidfile" ]; then
		pid=$(cat "$pidfile")
		if ! [ -d "/proc/$pid" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != dockerd ]; then
			log "removing stale $pidfile (pid $pid)"
			rm -f "$pidfile"
		fi
	fi
	if pid=$(dockerd_pid); then
		log "dockerd already running (pid $pid), waiting for it to answer"
	else
		log "starting dockerd (log: $DOCKERD_LOG)"
		setsid dockerd >"$DOCKERD_LOG" 2>&1 </dev/null &
		pid=$!
	fi
	local i
	for i in $(seq 1 120); do
		docker_up && break
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 30 "$DOCKERD_LOG" >&2 || true
			die "dockerd (pid $pid) exited; log above ($DOCKERD_LOG)"
		fi
		if [ "$i" = 120 ]; then
			tail -n 30 "$DOCKERD_LOG" >&2 || true
			die "dockerd (pid $pid) not answering 'docker info' after 60 s; log above ($DOCKERD_LOG)"
		fi
		sleep 0.5
	done
	log "dockerd up: server $(docker version --format '{{.Server.Version}}'), storage driver $(docker info --format '{{.Driver}}')"
}

# ------------------------------------------------------------- 3. rootfs ---
# The Debian mirror to debootstrap from: IDGEN_DEBIAN_MIRROR, else the first
# one the machine's apt sources name for $SUITE (.ci/debian-mirror.sh). No
# address is built in: a CI machine may reach only its own mirror, and a
# guessed one would fail late, inside debootstrap.
debian_mirror() {
	if [ -n "${IDGEN_DEBIAN_MIRROR:-}" ]; then
		printf '%s\n' "$IDGEN_DEBIAN_MIRROR"
		return
	fi
	bash "$SCRIPT_DIR/debian-mirror.sh" "$SUITE" ||
		die "no Debian $SUITE mirror in the apt sources (see above); set IDGEN_DEBIAN_MIRROR or add a source"
}

# Unmount anything below $1 (deepest first), then delete it without crossing
# into other file systems: debootstrap bind-mounts /dev, /proc, /sys while it
# works and leaves them mounted if it is interrupted.
remove_rootfs() {
	local dir=$1 m
	[ -n "$dir" ] && [ -d "$dir" ] || return 0
	while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done < <(awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r)
	if awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { found = 1 } END { exit !found }' /proc/mounts; then
		die "cannot unmount everything under $dir; not deleting it"
	fi
	rm -rf --one-file-system "$dir"
}

ROOTFS=""
cleanup() { [ -z "$ROOTFS" ] || remove_rootfs "$ROOTFS"; }
trap cleanup EXIT
trap 'exit 130' INT TERM # so that the EXIT trap runs

build_rootfs() {
	need_root
	local mirror
	mirror=$(debian_mirror) || exit 1
	# Leftovers of an interrupted run.
	local old
	for old in "$ROOTFS_PARENT"/idgen-rootfs.*; do
		[ -d "$old" ] || continue
		log "removing leftover $old"
		remove_rootfs "$old"
	done
	ROOTFS=$(mktemp -d "$ROOTFS_PARENT/idgen-rootfs.XXXXXX")
	# mmdebstrap rather than debootstrap: apt resolves and downloads in
	# parallel and dpkg runs once, without an fsync per file (the rootfs is
	# thrown away if the build is interrupted): 237 s against
	# debootstrap's 670 s, on the same loaded machine.
	log "mmdebstrap --variant=minbase --include=$PACKAGES $SUITE $ROOTFS $mirror"
	if ! mmdebstrap --mode=root --variant=minbase --include="$PACKAGES" \
		--dpkgopt=force-unsafe-io --aptopt='Acquire::Queue-Mode "host"' \
		"$SUITE" "$ROOTFS" "$mirror" >/tmp/idgen-debootstrap.log 2>&1; then
		tail -n 40 /tmp/idgen-debootstrap.log >&2 || true
		die "mmdebstrap failed (log: /tmp/idgen-debootstrap.log)"
	fi
	[ -x "$ROOTFS/usr/lib/postgresql/15/bin/postgres" ] || die "rootfs has no PostgreSQL 15"
	[ -x "$ROOTFS/usr/sbin/mariadbd" ] || die "rootfs has no mariadbd"
	[ -x "$ROOTFS/usr/bin/redis-server" ] || die "rootfs has no redis-server"

	# The packages' postinst made a default cluster and a MariaDB data dir:
	# the entrypoints make their own on first start (and detect it by these).
	rm -rf "${ROOTFS:?}"/var/lib/postgresql/15 "${ROOTFS:?}"/etc/postgresql/15
	rm -rf "${ROOTFS:?}"/var/lib/mysql
	install -d -o "$(chroot "$ROOTFS" id -u postgres)" -g "$(chroot "$ROOTFS" id -g postgres)" -m 700 \
		"$ROOTFS/var/lib/postgresql/data"
	install -d -o "$(chroot "$ROOTFS" id -u mysql)" -g "$(chroot "$ROOTFS" id -g mysql)" -m 755 \
		"$ROOTFS/var/lib/mysql"
	install -d -m 755 "$ROOTFS/docker-entrypoint-initdb.d"
	# /data, as in the official redis image, so that a volume mounted
	# there works with either image.
	install -d -o "$(chroot "$ROOTFS" id -u redis)" -g "$(chroot "$ROOTFS" id -g redis)" -m 750 \
		"$ROOTFS/data"
	# Trim: downloaded .debs, apt lists, docs (about a third of the size).
	rm -rf "${ROOTFS:?}"/var/cache/apt/archives/*.deb "${ROOTFS:?}"/var/lib/apt/lists/* \
		"${ROOTFS:?}"/usr/share/doc/* "${ROOTFS:?}"/usr/share/man/* "${ROOTFS:?}"/usr/share/info/* \
		"${ROOTFS:?}"/var/log/*.log "${ROOTFS:?}"/run/* "${ROOTFS:?}"/tmp/* 2>/dev/null || true
	log "rootfs size: $(du -sh --one-file-system "$ROOTFS" | cut -f1)"
}

import_base() {
	# Only what belongs in an image: /dev, /proc and /sys are the engine's.
	tar -C "$ROOTFS" --numeric-owner --one-file-system \
		--exclude=./dev/* --exclude=./proc/* --exclude=./sys/* -c . |
		docker import \
			--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			--change 'ENV LANG=C.UTF-8' \
			--change 'CMD ["bash"]' \
			--change "LABEL org.idgen.test-image.base=$BASE_IMAGE" \
			- "$BASE_IMAGE" >/dev/null
	log "imported $BASE_IMAGE ($(docker image inspect --format '{{.Size}}' "$BASE_IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
	remove_rootfs "$ROOTFS"
	ROOTFS=""
}

ensure_base() {
	if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
		log "$BASE_IMAGE present"
		return
	fi
	phase "mmdebstrap rootfs" build_rootfs
	phase "docker import $BASE_IMAGE" import_base
}

# --------------------------------------------------------- 4. test images ---
# image_wanted NAME SCRIPT: succeeds when NAME is missing or out of date.
image_wanted() {
	local name=$1 script=$2 want have
	want="$(sha256sum <"$script" | cut -c1-64) $(docker image inspect --format '{{.Id}}' "$BASE_IMAGE")"
	have=$(docker image inspect --format '{{index .Config.Labels "org.idgen.test-image.recipe"}}' "$name" 2>/dev/null) || return 0
	[ "$have" != "$want" ]
}

# make_image NAME SCRIPT INSTRUCTION...: base image + SCRIPT as the entrypoint,
# built with the classic builder from a local base (nothing is pulled).
# (`docker commit/import --change` would do but for STOPSIGNAL, which
# dockerd 20.10 refuses there.)
make_image() {
	local name=$1 script=$2 recipe ctx
	shift 2
	recipe="$(sha256sum <"$script" | cut -c1-64) $(docker image inspect --format '{{.Id}}' "$BASE_IMAGE")"
	ctx=$(mktemp -d)
	install -m 755 "$script" "$ctx/docker-entrypoint.sh"
	{
		echo "FROM $BASE_IMAGE"
		echo "COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh"
		printf '%s\n' "$@"
		echo 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]'
		echo "LABEL org.idgen.test-image.recipe=\"$recipe\""
	} >"$ctx/Dockerfile"
	if ! DOCKER_BUILDKIT=0 docker build --pull=false -q -t "$name" "$ctx" >"$ctx/build.log" 2>&1; then
		cat "$ctx/build.log" >&2
		rm -rf "$ctx"
		die "docker build of $name failed"
	fi
	rm -rf "$ctx"
	log "built $name"
}

ensure_images() {
	local pg_script="$SCRIPT_DIR/images/postgres-entrypoint.sh"
	local my_script="$SCRIPT_DIR/images/mysql-entrypoint.sh"
	local redis_script="$SCRIPT_DIR/images/redis-entrypoint.sh"
	if ! [ -r "$pg_script" ] || ! [ -r "$my_script" ] || ! [ -r "$redis_script" ]; then
		die "missing entrypoint scripts under $SCRIPT_DIR/images"
	fi
	local need_pg=0 need_my=0 need_redis=0
	if ! docker image inspect "$PG_IMAGE" >/dev/null 2>&1 || ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 ||
		image_wanted "$PG_IMAGE" "$pg_script"; then need_pg=1; fi
	if ! docker image inspect "$MYSQL_IMAGE" >/dev/null 2>&1 || ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 ||
		image_wanted "$MYSQL_IMAGE" "$my_script"; then need_my=1; fi
	if ! docker image inspect "$REDIS_IMAGE" >/dev/null 2>&1 || ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 ||
		image_wanted "$REDIS_IMAGE" "$redis_script"; then need_redis=1; fi
	if [ "$need_pg$need_my$need_redis" = 000 ]; then
		log "$PG_IMAGE, $MYSQL_IMAGE and $REDIS_IMAGE present and up to date"
		return
	fi
	ensure_base
	if [ "$need_pg" = 1 ]; then
		phase "image $PG_IMAGE" make_image "$PG_IMAGE" "$pg_script" \
			'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			'ENV PGDATA=/var/lib/postgresql/data' \
			'ENV LANG=C.UTF-8' \
			'EXPOSE 5432' \
			'STOPSIGNAL SIGINT' \
			'CMD ["postgres"]'
	fi
	if [ "$need_my" = 1 ]; then
		phase "image $MYSQL_IMAGE" make_image "$MYSQL_IMAGE" "$my_script" \
			'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			'ENV LANG=C.UTF-8' \
			'EXPOSE 3306' \
			'CMD ["mariadbd"]'
	fi
	if [ "$need_redis" = 1 ]; then
		phase "image $REDIS_IMAGE" make_image "$REDIS_IMAGE" "$redis_script" \
			'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			'ENV LANG=C.UTF-8' \
			'VOLUME /data' \
			'WORKDIR /data' \
			'EXPOSE 6379' \
			'CMD ["redis-server"]'
	fi
	# Earlier builds of ours that lost their tag to the new ones.
	docker image prune -f --filter "label=org.idgen.test-image.recipe" >/dev/null || true
}

main() {
	log "start"
	phase "install packages" install_packages
	phase "dockerd" start_dockerd
	phase "test images" ensure_images
	log "total $(since "$T0") s; images:"
	docker image ls --format '  {{.Repository}}:{{.Tag}}  {{.ID}}  {{.Size}}' 'idgen-test/*' >&2 || true
	_idgen_docker_images_env
}

main "$@"
