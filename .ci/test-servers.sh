#!/usr/bin/env bash
# .ci/test-servers.sh: one PostgreSQL and one MySQL (MariaDB) server for a
# whole CI run, from the offline test images (.ci/docker-images.sh).
#
#   bash .ci/test-servers.sh start   # prints IDGEN_TEST_POSTGRES_DSN=… and IDGEN_TEST_MYSQL_DSN=…
#   bash .ci/test-servers.sh stop    # removes both containers
#
# With those variables set, store/dbtest.Start gives each test a schema
# (PostgreSQL) or a database (MySQL) of its own on these servers instead
# of a container of its own: about twenty fewer containers to start, each
# 8-12 s of a loaded machine, most of it initdb. Tests that stop, pause or
# configure their server still start their own (dbtest.StartContainer);
# the per-test containers stay what `go test` does on a contributor's
# machine, and every test passes both ways (store/dbtest's
# TestStart_ExternalIsolates runs only here).
set -euo pipefail

pg_name=idgen-ci-postgres my_name=idgen-ci-mysql
pg_image="${IDGEN_TEST_POSTGRES_IMAGE:-idgen-test/postgres:15}"
my_image="${IDGEN_TEST_MYSQL_IMAGE:-idgen-test/mysql:10.11}"

# host_port NAME PORT: the loopback port Docker published for PORT.
host_port() { docker port "$1" "$2/tcp" | head -n 1 | sed 's/.*://'; }

# ready NAME CMD: waits up to 120 s until the shell command CMD succeeds
# in the container.
ready() {
	local name=$1 cmd=$2
	for _ in $(seq 1 480); do
		if docker exec "$name" sh -c "$cmd" >/dev/null 2>&1; then return 0; fi
		sleep 0.25
	done
	docker logs "$name" >&2 || true
	echo "test-servers: $name did not become ready in 120 s" >&2
	return 1
}

case "${1:-}" in
start)
	docker rm -f "$pg_name" "$my_name" >/dev/null 2>&1 || true
	# Both start at once; the same environment as store/dbtest's containers.
	# Commits reach the kernel but wait for no disk flush: these servers
	# live for one run and are never killed, so a commit is lost only if
	# the machine crashes, and the tests that queue on one row lock
	# (storetest's contention run, 10,000 commits) are not bound by fsync
	# on a disk the reliability tests' servers share. Servers that tests
	# kill are their own containers, with the images' defaults.
	docker run -d --name "$pg_name" -p 127.0.0.1::5432 \
		-e POSTGRES_USER=idgen -e POSTGRES_PASSWORD=secret -e POSTGRES_DB=idgen "$pg_image" \
		-c fsync=off -c synchronous_commit=off -c full_page_writes=off >/dev/null
	docker run -d --name "$my_name" -p 127.0.0.1::3306 \
		-e MYSQL_ROOT_PASSWORD=secret -e MYSQL_DATABASE=idgen -e MYSQL_USER=idgen -e MYSQL_PASSWORD=secret "$my_image" \
		--innodb-flush-log-at-trx-commit=2 --sync-binlog=0 >/dev/null
	# A TCP query, as the tests make: the socket answers before the
	# entrypoint's first-start server has made way for the real one.
	ready "$pg_name" "PGPASSWORD=secret psql -h 127.0.0.1 -U idgen -d idgen -c 'SELECT 1'"
	ready "$my_name" "mysql -h 127.0.0.1 -uroot -psecret -e 'SELECT 1'"
	# The superuser and root: dbtest creates a schema or a database per test.
	echo "IDGEN_TEST_POSTGRES_DSN=postgres://idgen:secret@127.0.0.1:$(host_port "$pg_name" 5432)/idgen?sslmode=disable"
	echo "IDGEN_TEST_MYSQL_DSN=mysql://root:secret@127.0.0.1:$(host_port "$my_name" 3306)/idgen"
	;;
stop)
	docker rm -f "$pg_name" "$my_name" >/dev/null 2>&1 || true
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
