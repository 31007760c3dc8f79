#!/usr/bin/env bash
# Entrypoint of the CI test image idgen-test/redis:7 (see .ci/docker-images.sh).
#
# A small work-alike of the official redis image's docker-entrypoint.sh for
# Debian's redis-server package (7.0 in bookworm):
#   docker run IMAGE                          redis-server on 0.0.0.0:6379
#   docker run IMAGE --appendonly yes         the same, with extra options
#   docker run IMAGE redis-server --save ''   the same
#   docker run -it IMAGE bash                 anything else is run as is
# The official image's server is built to listen on every address with
# protected mode off when it has no config file; Debian's default is
# loopback only, which a container's peers cannot reach, so this script
# passes --bind 0.0.0.0 --protected-mode no before the caller's options
# (later options win; a config file stays first).
# The server runs as the redis user, keeping PID 1 (SIGTERM saves and
# exits), with its files in /data (the working directory) and its log on
# stdout. It is ready once it logs "Ready to accept connections".
set -Eeuo pipefail

log() { printf '%s [entrypoint] %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" "$*"; }
die() { log "error: $*" >&2; exit 1; }

# Flags only, or a config file first: the server's arguments.
if [ "$#" -eq 0 ] || [ "${1:0:1}" = '-' ] || [ "${1%.conf}" != "$1" ]; then
	set -- redis-server "$@"
fi
if [ "$1" != redis-server ]; then
	exec "$@"
fi
shift
# Options that only print something must come first, as typed.
case "${1:-}" in
	-v | --version | -h | --help | --test-memory | --check-system) exec redis-server "$@" ;;
esac
# redis-server reads a config file only as its first argument.
declare -a conf=()
if [ "$#" -gt 0 ] && [ "${1%.conf}" != "$1" ]; then
	conf=("$1")
	shift
fi

if [ "$(id -u)" = 0 ]; then
	# A fresh volume on /data belongs to root.
	mkdir -p /data
	if [ "$(stat -c %U /data)" != redis ]; then
		chown -R redis:redis /data
	fi
	exec setpriv --reuid=redis --regid=redis --init-groups redis-server "${conf[@]}" --bind 0.0.0.0 --protected-mode no "$@"
fi
[ -w . ] || die "the working directory $(pwd) is not writable by $(id -un)"
exec redis-server "${conf[@]}" --bind 0.0.0.0 --protected-mode no "$@"
