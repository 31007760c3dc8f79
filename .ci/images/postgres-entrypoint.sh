#!/usr/bin/env bash
# Entrypoint of the CI test image idgen-test/postgres:15 (see .ci/docker-images.sh).
#
# A small work-alike of the official postgres image's docker-entrypoint.sh for
# Debian's postgresql-15 package. Honoured environment:
#   POSTGRES_USER      superuser to create                      (default: postgres)
#   POSTGRES_PASSWORD  its password (required unless POSTGRES_HOST_AUTH_METHOD=trust)
#   POSTGRES_DB        database to create                       (default: $POSTGRES_USER)
#   PGDATA             data directory              (default: /var/lib/postgresql/data)
#   POSTGRES_INITDB_ARGS       extra initdb arguments
#   POSTGRES_HOST_AUTH_METHOD  auth method for TCP clients      (default: scram-sha-256)
#   /docker-entrypoint-initdb.d/*.sh|*.sql|*.sql.gz  run once, after the database is created
#
# On first start it initialises $PGDATA (initdb as the postgres OS user), opens
# TCP (listen_addresses='*', password auth from 0.0.0.0/0 and ::/0), creates the
# superuser role with its password and the database; like the official image it
# does so with a temporary socket-only server, so a fresh container logs
# "database system is ready to accept connections" twice and a restarted one
# (docker stop + docker start, which re-uses the initialised $PGDATA) once.
# Then it execs postgres in the foreground, as the postgres user, logging to
# stdout/stderr.
set -Eeuo pipefail

PGBIN=/usr/lib/postgresql/15/bin
export PATH="$PGBIN:$PATH"
export PGDATA="${PGDATA:-/var/lib/postgresql/data}"
POSTGRES_USER="${POSTGRES_USER:-postgres}"
POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"
POSTGRES_PASSWORD="${POSTGRES_PASSWORD:-}"
POSTGRES_INITDB_ARGS="${POSTGRES_INITDB_ARGS:-}"
POSTGRES_HOST_AUTH_METHOD="${POSTGRES_HOST_AUTH_METHOD:-}"
SOCKET_DIR=/var/run/postgresql

log() { printf '%s [entrypoint] %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" "$*"; }
die() { log "error: $*" >&2; exit 1; }

# `docker run IMAGE -c fsync=off` (flags only) means `postgres -c fsync=off`.
if [ "$#" -eq 0 ] || [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi
# Anything but the server (e.g. `docker run -it IMAGE bash`) is run as is.
if [ "$1" != postgres ]; then
	exec "$@"
fi

if [ "$(id -u)" = 0 ]; then
	# Runs at every start: /var/run is not a tmpfs in a container.
	mkdir -p "$PGDATA" "$SOCKET_DIR"
	chown postgres:postgres "$SOCKET_DIR"
	chmod 2775 "$SOCKET_DIR"
	# Only chown a data dir the server does not already own (e.g. a fresh volume).
	if [ "$(stat -c %U "$PGDATA")" != postgres ]; then
		chown -R postgres:postgres "$PGDATA"
	fi
	chmod 700 "$PGDATA"
	# Drop to the postgres user, keeping PID 1 (setpriv is in util-linux).
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$(readlink -f "${BASH_SOURCE[0]}")" "$@"
fi

sql_ident() { local s=${1//\"/\"\"}; printf '"%s"' "$s"; }

init_cluster() {
	local auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
	if [ -z "$POSTGRES_PASSWORD" ] && [ "$auth" != trust ]; then
		die "database is uninitialized and superuser password is not specified.
  You must specify POSTGRES_PASSWORD to a non-empty value for the superuser,
  or set POSTGRES_HOST_AUTH_METHOD=trust to allow all connections without a password."
	fi
	log "initialising $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB)"

	local pwfile
	pwfile="$(mktemp)"
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	local -a pwarg=()
	[ -n "$POSTGRES_PASSWORD" ] && pwarg=(--pwfile="$pwfile")
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of words, as in the official image
	initdb --username="$POSTGRES_USER" "${pwarg[@]}" \
		--encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host="$auth" --no-sync \
		$POSTGRES_INITDB_ARGS
	rm -f "$pwfile"

	{
		echo
		echo "# added by docker-entrypoint.sh"
		echo "listen_addresses = '*'"
		echo "password_encryption = scram-sha-256"
	} >>"$PGDATA/postgresql.conf"
	{
		echo
		echo "# added by docker-entrypoint.sh: password auth from anywhere"
		echo "host all all 0.0.0.0/0 $auth"
		echo "host all all ::/0 $auth"
	} >>"$PGDATA/pg_hba.conf"

	# Temporary server on the unix socket only; its log goes to our stdout.
	# No fsync in initdb or here: a test container's files only have to survive
	# the container (docker stop/start), not the host, and syncing takes seconds.
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=$SOCKET_DIR -c fsync=off" -w -t 60 start

	local -a psql=(psql -v ON_ERROR_STOP=1 --no-password --no-psqlrc -h "$SOCKET_DIR" --username "$POSTGRES_USER")
	if [ "$POSTGRES_DB" != postgres ]; then
		"${psql[@]}" --dbname postgres <<-EOSQL
			CREATE DATABASE $(sql_ident "$POSTGRES_DB");
		EOSQL
	fi

	local f
	for f in /docker-entrypoint-initdb.d/*; do
		[ -e "$f" ] || continue
		case "$f" in
			*.sh)
				if [ -x "$f" ]; then log "running $f"; "$f"
				else log "sourcing $f"; # shellcheck disable=SC1090
					. "$f"; fi ;;
			*.sql) log "running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
			*.sql.gz) log "running $f"; gunzip -c "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" ;;
			*) log "ignoring $f" ;;
		esac
	done

	pg_ctl -D "$PGDATA" -m fast -w -t 60 stop
	log "PostgreSQL init process complete; ready for start up."
}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	init_cluster
else
	log "PostgreSQL database directory appears to contain a database; skipping initialization"
fi

exec postgres "${@:2}"
