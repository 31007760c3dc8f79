#!/usr/bin/env bash
# Entrypoint of the CI test image idgen-test/mysql:10.11 (MariaDB; see .ci/docker-images.sh).
#
# A small work-alike of the official mariadb/mysql images' docker-entrypoint.sh
# for Debian's mariadb-server package. Honoured environment (MARIADB_* wins over MYSQL_*):
#   MARIADB_ROOT_PASSWORD / MYSQL_ROOT_PASSWORD
#   MARIADB_ALLOW_EMPTY_ROOT_PASSWORD / MYSQL_ALLOW_EMPTY_PASSWORD   (any non-empty value)
#   MARIADB_RANDOM_ROOT_PASSWORD / MYSQL_RANDOM_ROOT_PASSWORD        (printed to the log)
#   MARIADB_ROOT_HOST / MYSQL_ROOT_HOST   host of the extra root account (default: %)
#   MARIADB_DATABASE / MYSQL_DATABASE     database to create
#   MARIADB_USER / MYSQL_USER, MARIADB_PASSWORD / MYSQL_PASSWORD
#                                         user@'%' with ALL on that database
#   /docker-entrypoint-initdb.d/*.sh|*.sql|*.sql.gz  run once, after the above
#
# On first start: mariadb-install-db, a temporary server on the unix socket
# only, the accounts and database, shut it down. At every start (first, or
# after docker stop + docker start, which re-uses /var/lib/mysql) it then execs
#   mariadbd --user=mysql --bind-address=0.0.0.0 --port=3306 --console
# in the foreground, logging to stderr. The server is ready once it logs
#   ... [Note] mariadbd: ready for connections.
#   Version: '10.11.x-MariaDB-0+deb12u1'  socket: '/run/mysqld/mysqld.sock'  port: 3306  Debian 12
# (the temporary server of a first start logs the same with "port: 0").
set -Eeuo pipefail

DATADIR=/var/lib/mysql
RUNDIR=/run/mysqld
SOCKET="$RUNDIR/mysqld.sock"

log() { printf '%s [entrypoint] %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" "$*"; }
die() { log "error: $*" >&2; exit 1; }

# envv NAME [default]: $MARIADB_NAME if set and non-empty, else $MYSQL_NAME, else default.
envv() {
	local m="MARIADB_$1" y="MYSQL_$1"
	if [ -n "${!m:-}" ]; then printf '%s' "${!m}"
	elif [ -n "${!y:-}" ]; then printf '%s' "${!y}"
	else printf '%s' "${2:-}"; fi
}

# `docker run IMAGE --foo` (flags only) means `mariadbd --foo`.
if [ "$#" -eq 0 ] || [ "${1:0:1}" = '-' ]; then
	set -- mariadbd "$@"
fi
# Anything but the server (e.g. `docker run -it IMAGE bash`) is run as is.
case "$1" in
	mariadbd | mysqld) ;;
	*) exec "$@" ;;
esac
shift # the remaining "$@" are extra server options

[ "$(id -u)" = 0 ] || die "must start as root (the server drops to the mysql user itself)"

# Runs at every start: /run is not a tmpfs in a container.
mkdir -p "$RUNDIR" "$DATADIR"
chown mysql:mysql "$RUNDIR"
chmod 0755 "$RUNDIR"
if [ "$(stat -c %U "$DATADIR")" != mysql ]; then
	chown -R mysql:mysql "$DATADIR"
fi

sql_string() { local s=${1//\\/\\\\}; s=${s//\'/\\\'}; printf "'%s'" "$s"; }
# shellcheck disable=SC2016 # the backticks are literal
sql_ident() { local s=${1//\`/\`\`}; printf '`%s`' "$s"; }

init_datadir() {
	local root_pw allow_empty random_pw root_host db user pw
	root_pw="$(envv ROOT_PASSWORD)"
	allow_empty="$(envv ALLOW_EMPTY_ROOT_PASSWORD)"
	[ -n "$allow_empty" ] || allow_empty="${MYSQL_ALLOW_EMPTY_PASSWORD:-}"
	random_pw="$(envv RANDOM_ROOT_PASSWORD)"
	root_host="$(envv ROOT_HOST '%')"
	db="$(envv DATABASE)"
	user="$(envv USER)"
	pw="$(envv PASSWORD)"

	if [ -z "$root_pw" ] && [ -z "$allow_empty" ] && [ -z "$random_pw" ]; then
		die "Database is uninitialized and password option is not specified
  You need to specify one of MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD and MARIADB_RANDOM_ROOT_PASSWORD
  (or their MYSQL_* names: MYSQL_ROOT_PASSWORD, MYSQL_ALLOW_EMPTY_PASSWORD, MYSQL_RANDOM_ROOT_PASSWORD)"
	fi
	if [ -z "$root_pw" ] && [ -n "$random_pw" ]; then
		root_pw="$(head -c 48 /dev/urandom | base64 | tr -d '/+=\n' | cut -c1-32)"
		log "GENERATED ROOT PASSWORD: $root_pw"
	fi
	if [ "$user" = root ]; then
		log "warning: MYSQL_USER/MARIADB_USER=root ignored: root is set up by the *ROOT_PASSWORD variables"
		user=""
	fi
	if [ -n "$user" ] && [ -z "$pw" ]; then
		die "MARIADB_USER/MYSQL_USER is set ($user) but MARIADB_PASSWORD/MYSQL_PASSWORD is empty"
	fi

	log "initialising $DATADIR (database '${db}', user '${user}')"
	mariadb-install-db --user=mysql --datadir="$DATADIR" --rpm --skip-test-db \
		--auth-root-authentication-method=normal --skip-name-resolve \
		--skip-log-bin --expire-logs-days=0 --default-time-zone=SYSTEM \
		--loose-innodb_buffer_pool_load_at_startup=0 --loose-innodb_buffer_pool_dump_at_shutdown=0 \
		"$@" >/dev/null # stdout is only the "set a root password" banner; errors go to stderr

	log "starting temporary server (socket only)"
	mariadbd --user=mysql --datadir="$DATADIR" --skip-networking --socket="$SOCKET" --console \
		--skip-log-bin --expire-logs-days=0 --default-time-zone=SYSTEM --skip-slave-start \
		--loose-innodb_buffer_pool_load_at_startup=0 --loose-innodb_buffer_pool_dump_at_shutdown=0 \
		"$@" &
	local pid=$! i
	local -a client=(mariadb --protocol=socket --socket="$SOCKET" -uroot --batch --skip-column-names)
	for i in $(seq 1 120); do
		if "${client[@]}" --database=mysql -e 'SELECT 1' >/dev/null 2>&1; then break; fi
		kill -0 "$pid" 2>/dev/null || die "temporary server exited during start-up"
		[ "$i" -lt 120 ] || die "temporary server did not come up within 60 s"
		sleep 0.5
	done

	{
		echo "SET @@SESSION.SQL_LOG_BIN=0;"
		echo "SET @@SESSION.SQL_MODE=REPLACE(@@SESSION.SQL_MODE, 'NO_BACKSLASH_ESCAPES', '');"
		# No anonymous accounts, no root accounts but the ones made here.
		echo "DELETE FROM mysql.global_priv WHERE User='' OR (User='root' AND Host NOT IN ('localhost'));"
		echo "DELETE FROM mysql.proxies_priv WHERE User='' OR (User='root' AND Host NOT IN ('localhost'));"
		echo "FLUSH PRIVILEGES;"
		echo "DROP DATABASE IF EXISTS test;"
		if [ "$root_host" != localhost ]; then
			echo "CREATE USER 'root'@$(sql_string "$root_host") IDENTIFIED BY $(sql_string "$root_pw");"
			echo "GRANT ALL ON *.* TO 'root'@$(sql_string "$root_host") WITH GRANT OPTION;"
			echo "GRANT PROXY ON ''@'%' TO 'root'@$(sql_string "$root_host") WITH GRANT OPTION;"
		fi
		if [ -n "$db" ]; then
			echo "CREATE DATABASE IF NOT EXISTS $(sql_ident "$db");"
		fi
		if [ -n "$user" ]; then
			echo "CREATE USER $(sql_string "$user")@'%' IDENTIFIED BY $(sql_string "$pw");"
			if [ -n "$db" ]; then
				echo "GRANT ALL ON $(sql_ident "$db").* TO $(sql_string "$user")@'%';"
			fi
		fi
		# Last: from here on root@localhost needs the password.
		echo "ALTER USER 'root'@'localhost' IDENTIFIED BY $(sql_string "$root_pw");"
		echo "FLUSH PRIVILEGES;"
	} | "${client[@]}" --database=mysql

	local f
	local -a rootclient=("${client[@]}")
	[ -z "$root_pw" ] || rootclient+=(--password="$root_pw")
	[ -z "$db" ] || rootclient+=(--database="$db")
	for f in /docker-entrypoint-initdb.d/*; do
		[ -e "$f" ] || continue
		case "$f" in
			*.sh)
				if [ -x "$f" ]; then log "running $f"; "$f"
				else log "sourcing $f"; # shellcheck disable=SC1090
					. "$f"; fi ;;
			*.sql) log "running $f"; "${rootclient[@]}" <"$f" ;;
			*.sql.gz) log "running $f"; gunzip -c "$f" | "${rootclient[@]}" ;;
			*) log "ignoring $f" ;;
		esac
	done

	log "stopping temporary server"
	kill -TERM "$pid"
	wait "$pid" || die "temporary server did not shut down cleanly"
	log "MariaDB init process done. Ready for start up."
}

if [ ! -d "$DATADIR/mysql" ]; then
	init_datadir "$@"
else
	log "MariaDB data directory appears to contain a database; skipping initialization"
fi

exec mariadbd --user=mysql --bind-address=0.0.0.0 --port=3306 --console --skip-name-resolve "$@"
