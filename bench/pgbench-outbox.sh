#!/usr/bin/env bash
# The database's own bound for enqueueing one outbox message in the payment
# transaction: pgbench runs, in alternating runs with no Go in the loop, the
# middleware's payment transaction (idem.sql); the same with the outbox's
# enqueue as it is (pgbench/narrow.sql: one row of the narrow table
# idem_outbox_enqueued, primary key only), with and without a notification
# in every transaction (Enqueue sends at most one per FetchCooldown and
# Outbox, so with it is the costlier end; without it, the narrow insert's
# bound); and with River's job insert as the outbox sent it before the relay
# (pgbench/outbox.sql), with and without its insert notification. It prints
# each one's mean transactions per second and its share of idem's. The
# outbox's schema is applied with its Migrate (go run ./bench/outbox -mode
# migrate). Clients is the number of transactions in flight (16 by default).
#   bash bench/pgbench-outbox.sh [rounds] [seconds per run] [clients]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
secs=${2:-10}
clients=${3:-16}
source bench/pgbench/schema.sh
scripts=$(mktemp -d)
trap 'rm -rf "$scripts"; pgbench_drop_schema' EXIT
pgbench_schema
go run ./bench/outbox -mode migrate -schema "$pgbench_schema_name"
cp bench/pgbench/idem.sql bench/pgbench/narrow.sql bench/pgbench/outbox.sql "$scripts"
for v in narrow outbox; do
	awk '$0 == "-- drop:notify" {skip = 1; next} skip {if ($0 ~ /;$/) skip = 0; next} {print}' \
		"bench/pgbench/$v.sql" >"$scripts/$v-without-notify.sql"
done
variants="idem narrow-without-notify narrow outbox-without-notify outbox"
for _ in $(seq "$rounds"); do
	for v in $variants; do
		printf '%s ' "$v"
		pgbench -n -M prepared -c "$clients" -j 1 -T "$secs" -f "$scripts/$v.sql" "$DATABASE_URL" 2>&1 |
			awk '/^tps/ {print $3} /error|ERROR/ {print > "/dev/stderr"}'
	done
done | awk -v order="$variants" '{tps[$1] += $2; n[$1]++; printf "%s %.0f tps\n", $1, $2}
	END {split(order, vs, " "); base = tps["idem"]/n["idem"];
		for (i = 1; i in vs; i++) {v = vs[i];
			printf "mean %-22s %6.0f tps (%5.1f%% of idem), %d runs\n", v, tps[v]/n[v], 100*tps[v]/n[v]/base, n[v]}}'
