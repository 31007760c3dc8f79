#!/usr/bin/env bash
# metrics-series.sh measures what one idgen instance's /metrics costs at
# a given tag count: it starts `idgen serve` on a fresh SQLite file on
# loopback, draws IDs of N tags (one request each, 4 at a time), scrapes
# /metrics once and prints the number of series, the number carrying a
# tag label, and the scrape's bytes. Bounded: N requests, then the
# server is stopped by its PID.
#
#   internal/bench/metrics-series.sh BINARY N [serve flags…]
#   internal/bench/metrics-series.sh /tmp/idgen 10000 --metrics-tag-limit 100
set -euo pipefail
bin=${1:?usage: metrics-series.sh BINARY N [serve flags…]}
n=${2:?usage: metrics-series.sh BINARY N [serve flags…]}
shift 2
dir=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
"$bin" serve --addr "127.0.0.1:$port" --store "sqlite://$dir/m.db" --snowflake=false \
  --access-log=false --max-tags "$((n + 10))" "$@" >"$dir/serve.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do
  curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.1
done
seq -f "tag%05g" 1 "$n" | xargs -P 4 -I{} curl -fs -o /dev/null "http://127.0.0.1:$port/id/{}"
curl -fs "http://127.0.0.1:$port/metrics" >"$dir/metrics.txt"
series=$(grep -vc '^#' "$dir/metrics.txt")
tagged=$(grep -v '^#' "$dir/metrics.txt" | grep -c 'tag="' || true)
bytes=$(wc -c <"$dir/metrics.txt")
issued=$(grep '^idgen_ids_issued_total' "$dir/metrics.txt" | awk '{s += $2} END {print s}')
echo "tags=$n series=$series tag_series=$tagged bytes=$bytes ids_issued_sum=$issued"
