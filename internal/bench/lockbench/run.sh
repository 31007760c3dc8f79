#!/bin/sh
# run.sh [rounds [pattern [out]]]: the lock benchmarks as
# docs/benchmarks.md's "Locks" section reports them. Each round is a
# process of its own that runs every row once (-count 1), so the rows
# of a server interleave in time; every other round runs them in
# reverse order (LOCKBENCH_REVERSE). The raw output goes to out
# (../results/locks.txt), then benchstat summarises it. pattern, a
# -test.bench regexp, runs a part: 8 'AcquireRelease/db=redis'
# ../results/locks-redis.txt is Redis's acquire+release rows alone.
#
# Servers as for the backends' own tests: PostgreSQL and MariaDB from
# store/dbtest (IDGEN_TEST_POSTGRES_DSN / IDGEN_TEST_MYSQL_DSN, or
# Docker), redis-server and etcd on PATH. A missing one is skipped.
set -e
cd "$(dirname "$0")"
rounds=${1:-8}
pattern=${2:-.}
out=${3:-../results/locks.txt}
bin=$(mktemp -d)/lockbench.test
go test -c -o "$bin" .
: > "$out"
echo "# $(date -u '+%F %R') UTC, $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg) at the start" | tee -a "$out"
i=1
while [ "$i" -le "$rounds" ]; do
	if [ $((i % 2)) = 0 ]; then export LOCKBENCH_REVERSE=1; else unset LOCKBENCH_REVERSE; fi
	"$bin" -test.run '^$' -test.bench "$pattern" -test.benchmem -test.count 1 >> "$out"
	i=$((i + 1))
done
echo "# $(date -u '+%F %R') UTC, load average $(cut -d' ' -f1 /proc/loadavg) at the end" | tee -a "$out"
rm -r "$(dirname "$bin")"
go tool benchstat -col /impl -filter .name:AcquireRelease "$out"
go tool benchstat -filter .name:HandOff "$out"
