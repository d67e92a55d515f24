#!/usr/bin/env bash
# What each of the middleware's statements costs the database: pgbench
# runs, with one client by default (no contention, so that the differences
# are the statements' own cost) or with the clients given (what each costs
# in throughput when the database is busy), the plain payment transaction
# (plain.sql), the middleware's (idem.sql), idem.sql without each of its
# statements in turn (the scope's lock, the record's read, the record's
# insert; marked "-- drop:" there) and without all three, and issue 5's
# sketch of a claim that inserts the record and an UPDATE that stores the
# result (claim-update.sql). It prints each variant's mean latency per
# transaction and its difference to plain, and its mean transactions per
# second as a share of plain's.
#   bash bench/pgbench-statements.sh [rounds] [seconds per run] [clients]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-4}
secs=${2:-5}
clients=${3:-1}
source bench/pgbench/schema.sh
scripts=$(mktemp -d)
trap 'rm -rf "$scripts"; pgbench_drop_schema' EXIT
pgbench_schema
cp bench/pgbench/plain.sql bench/pgbench/idem.sql bench/pgbench/claim-update.sql "$scripts"
for s in lock read record; do
	# Drop the lines from the marker to the end of its statement. Without
	# the lock the claim's transaction is still marked (sqlTryLock does
	# both), so that the record's insert still writes.
	keep=""
	[ "$s" = lock ] && keep="SELECT set_config('idem.claim', 'on', true);"
	awk -v marker="-- drop:$s" -v keep="$keep" \
		'$0 == marker {skip = 1; if (keep != "") print keep; next} skip {if ($0 ~ /;$/) skip = 0; next} {print}' \
		bench/pgbench/idem.sql >"$scripts/idem-without-$s.sql"
done
# All three dropped: BEGIN and COMMIT in the middleware's pipelines, which
# shows what its round trips cost apart from its statements.
awk '/^-- drop:/ {skip = 1; next} skip {if ($0 ~ /;$/) skip = 0; next} {print}' \
	bench/pgbench/idem.sql >"$scripts/idem-without-all.sql"
variants="plain idem idem-without-lock idem-without-read idem-without-record idem-without-all claim-update"
for _ in $(seq "$rounds"); do
	for v in $variants; do
		printf '%s ' "$v"
		pgbench -n -M prepared -c "$clients" -j 1 -T "$secs" -f "$scripts/$v.sql" "$DATABASE_URL" 2>&1 |
			awk '/^latency average/ {ms = $4} /^tps/ {print ms, $3} /error|ERROR/ {print > "/dev/stderr"}'
	done
done | awk -v order="$variants" '{ms[$1] += $2; tps[$1] += $3; n[$1]++}
	END {split(order, vs, " "); base = 1000*ms["plain"]/n["plain"]; basetps = tps["plain"]/n["plain"];
		for (i = 1; i in vs; i++) {v = vs[i]; us = 1000*ms[v]/n[v];
			printf "%-20s %6.1f us per transaction (%+6.1f us against plain), %6.0f tps (%5.1f%% of plain), %d runs\n",
				v, us, us-base, tps[v]/n[v], 100*tps[v]/n[v]/basetps, n[v]}}'
