#!/usr/bin/env bash
# The database's own bound at a table size (issue 20), with no Go in the
# loop: idem_records filled with rows records (bench/pgbench/fill.sql, the
# first tenth of them expired), then pgbench runs of the payment
# transaction as plain SQL (plain.sql) and as the middleware sends it for
# a new key (idem.sql), alternating, with clients in flight; then the
# sweeper's DELETE (sweep.sql, batches of 1,000 or [batch]) alone on one client over
# a third of the expired tenth; then the DELETE again, on one client, while the
# clients run idem.sql for [seconds per run], with its p50, p99 and
# longest batch (pgbench's per-transaction log); and a VACUUM after it. It prints the tps of each
# transaction and their ratio, the rows the DELETE removes per second and
# the VACUUM's time. It works in a schema of its own in DATABASE_URL's
# database, dropped at the end (bench/pgbench/schema.sh); point
# DATABASE_URL at any cluster (autovacuum plays no part in these runs).
# A batch's time is also the longest a claim waits for the sweeper (a
# retry that reuses an expired key in the batch being deleted).
#   bash bench/pgbench-scale.sh [rows] [rounds] [seconds per run] [clients] [batch]
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-1000000}
rounds=${2:-3}
secs=${3:-10}
clients=${4:-16}
batch=${5:-1000}
if ! [[ "$rows $rounds $secs $clients $batch" =~ ^([1-9][0-9]*( |$)){5}$ ]]; then
	echo "usage: bash bench/pgbench-scale.sh [rows] [rounds] [seconds per run] [clients] [batch], each a positive integer" >&2
	exit 2
fi
expired=$((rows / 10))
source bench/pgbench/schema.sh
logs="" load=""
cleanup() { # also when a step fails: no load left running, no logs left behind
	if [[ -n $load ]]; then kill "$load" 2>/dev/null || true; fi
	if [[ -n $logs ]]; then rm -rf "$logs"; fi
	pgbench_drop_schema
}
trap cleanup EXIT
pgbench_schema
start=$(date +%s)
psql -q -v ON_ERROR_STOP=1 -v rows="$rows" -v expired="$expired" "$DATABASE_URL" -f bench/pgbench/fill.sql
echo "filled $rows records ($expired expired) in $(($(date +%s) - start)) s;" \
	"$(psql -Atc "SELECT pg_size_pretty(pg_total_relation_size('idem_records'))" "$DATABASE_URL") with indexes"
pgbench_plain_vs_idem "$rounds" "$secs" "$clients"
batches=$((expired / 3 / batch)) # a third alone, the rest for the run under load
if ((batches == 0)); then
	echo "sweep: not measured (fewer than $batch expired records)"
	exit 0
fi
pgbench -n -M prepared -c 1 -j 1 -t "$batches" -D batch="$batch" -f bench/pgbench/sweep.sql "$DATABASE_URL" 2>&1 |
	awk -v b="$batch" '/^latency average/ {ms = $4} /^tps/ {printf "sweep: %.0f rows deleted per second (a batch of %d in %.1f ms)\n", $3*b, b, ms}
		/error|ERROR/ {print > "/dev/stderr"}'
echo "left expired: $(psql -Atc "SELECT count(*) FROM idem_records WHERE expires_at <= now()" "$DATABASE_URL")"
logs=$(mktemp -d)
pgbench -n -M prepared -c "$clients" -j 1 -T "$secs" -f bench/pgbench/idem.sql "$DATABASE_URL" >"$logs/load" 2>&1 &
load=$!
pgbench -n -M prepared -c 1 -j 1 -T "$secs" -D batch="$batch" -l --log-prefix="$logs/sweep" \
	-f bench/pgbench/sweep.sql "$DATABASE_URL" >/dev/null
wait "$load" || { load=""; cat "$logs/load" >&2; exit 1; }
load=""
awk '/^tps/ {printf "under load: idem %.0f tps beside the sweep;", $3}' "$logs/load"
# Nearest-rank percentiles of the batches' latencies (pgbench's log: µs).
cat "$logs"/sweep.* | awk '{print $3}' | sort -n |
	awk -v b="$batch" 'function rank(q,  i) {i = int(q * NR); if (i < q * NR) i++; return i < 1 ? 1 : i}
		{x[NR] = $1} END {printf " batches of %d: %d, p50 %.1f ms, p99 %.1f ms, longest %.1f ms\n",
			b, NR, x[rank(0.5)] / 1000, x[rank(0.99)] / 1000, x[NR] / 1000}'
left=$(psql -Atc "SELECT count(*) FROM idem_records WHERE expires_at <= now()" "$DATABASE_URL")
echo "left expired: $left"
if ((left == 0)); then
	echo "warning: the sweep under load ran out of expired records, so its figures count empty batches: use more rows or fewer seconds" >&2
fi
start=$(date +%s%N)
psql -q -c "VACUUM idem_records" "$DATABASE_URL"
echo "VACUUM after the sweep: $(( ($(date +%s%N) - start) / 1000000 )) ms"
