#!/usr/bin/env bash
# The database's share of the middleware's cost: pgbench runs the payment
# transaction of server.BenchmarkPaymentOverhead as plain SQL (plain.sql)
# and as the middleware sends it for a new key (idem.sql), in alternating
# runs, with no Go in the loop, and prints each one's mean transactions per
# second and their ratio. It works in a schema of its own in DATABASE_URL's
# database, dropped at the end (bench/pgbench/schema.sh). Clients is the
# number of transactions in flight (16, as in the Go benchmark, by default).
#   bash bench/pgbench-model.sh [rounds] [seconds per run] [clients]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
secs=${2:-10}
clients=${3:-16}
source bench/pgbench/schema.sh
trap pgbench_drop_schema EXIT
pgbench_schema
for _ in $(seq "$rounds"); do
	for v in plain idem; do
		printf '%s ' "$v"
		pgbench -n -M prepared -c "$clients" -j 1 -T "$secs" -f "bench/pgbench/$v.sql" "$DATABASE_URL" 2>&1 |
			awk '/^tps/ {print $3} /error|ERROR/ {print > "/dev/stderr"}'
	done
done | awk '{tps[$1] += $2; n[$1]++; printf "%s %.0f tps\n", $1, $2}
	END {printf "mean: plain %.0f, idem %.0f tps: idem/plain %.1f%%\n",
		tps["plain"]/n["plain"], tps["idem"]/n["idem"], 100*tps["idem"]/n["idem"]/(tps["plain"]/n["plain"])}'
