#!/usr/bin/env bash
# The database's own bound for enqueueing one outbox message in the payment
# transaction: pgbench runs, in alternating runs with no Go in the loop, the
# middleware's payment transaction (idem.sql), the same with River's job
# insert for the outbox and an insert notification in every transaction
# (pgbench/outbox.sql; River sends at most one notification per
# FetchCooldown and client, so this is the costlier end), and with the
# insert alone (the notification dropped: the cheaper end). It prints each
# one's mean transactions per second and its share of idem's. River's schema
# is applied with the outbox's Migrate (go run ./bench/outbox -mode
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
cp bench/pgbench/idem.sql bench/pgbench/outbox.sql "$scripts"
awk '$0 == "-- drop:notify" {skip = 1; next} skip {if ($0 ~ /;$/) skip = 0; next} {print}' \
	bench/pgbench/outbox.sql >"$scripts/outbox-without-notify.sql"
variants="idem outbox outbox-without-notify"
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
