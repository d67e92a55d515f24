#!/usr/bin/env bash
# The database's own bound for enqueueing one outbox message in the payment
# transaction: pgbench runs the middleware's payment transaction (idem.sql)
# and the same with River's job insert and its notification
# (pgbench/outbox.sql), in alternating runs, with no Go in the loop, and
# prints each one's mean transactions per second and their ratio. River's
# schema is applied with the outbox's Migrate (go run ./bench/outbox -mode
# migrate). Clients is the number of transactions in flight (16 by default).
#   bash bench/pgbench-outbox.sh [rounds] [seconds per run] [clients]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
secs=${2:-10}
clients=${3:-16}
source bench/pgbench/schema.sh
trap pgbench_drop_schema EXIT
pgbench_schema
go run ./bench/outbox -mode migrate -schema "$pgbench_schema_name"
for _ in $(seq "$rounds"); do
	for v in idem outbox; do
		printf '%s ' "$v"
		pgbench -n -M prepared -c "$clients" -j 1 -T "$secs" -f "bench/pgbench/$v.sql" "$DATABASE_URL" 2>&1 |
			awk '/^tps/ {print $3} /error|ERROR/ {print > "/dev/stderr"}'
	done
done | awk '{tps[$1] += $2; n[$1]++; printf "%s %.0f tps\n", $1, $2}
	END {printf "mean: idem %.0f, idem+outbox %.0f tps: with/without %.1f%%\n",
		tps["idem"]/n["idem"], tps["outbox"]/n["outbox"], 100*tps["outbox"]/n["outbox"]/(tps["idem"]/n["idem"])}'
