#!/usr/bin/env bash
# The database's share of the middleware's cost: pgbench runs the payment
# transaction of server.BenchmarkPaymentOverhead as plain SQL (plain.sql)
# and as the middleware sends it for a new key (idem.sql), in alternating
# runs, with no Go in the loop, and prints each one's mean transactions per
# second and their ratio. It works in a schema of its own in DATABASE_URL's
# database, dropped at the end.
#   bash bench/pgbench-model.sh [rounds] [seconds per run]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
secs=${2:-10}
: "${DATABASE_URL:?set DATABASE_URL (see README)}"
schema=idem_pgbench_$$
export PGOPTIONS="-c search_path=$schema -c client_min_messages=warning"
psql -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "CREATE SCHEMA $schema" >/dev/null
trap 'PGOPTIONS="-c client_min_messages=warning" psql -q "$DATABASE_URL" -c "DROP SCHEMA $schema CASCADE" >/dev/null' EXIT
psql -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -f server/schema.sql >/dev/null
psql -q -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT g, 1000000000 FROM generate_series(0, 999) AS g;
CREATE TABLE payments (id bigserial PRIMARY KEY, account_id bigint NOT NULL REFERENCES accounts,
    amount bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
SQL
for _ in $(seq "$rounds"); do
	for v in plain idem; do
		printf '%s ' "$v"
		pgbench -n -M prepared -c 16 -j 1 -T "$secs" -f "bench/pgbench/$v.sql" "$DATABASE_URL" 2>&1 |
			awk '/^tps/ {print $3} /error|ERROR/ {print > "/dev/stderr"}'
	done
done | awk '{tps[$1] += $2; n[$1]++; printf "%s %.0f tps\n", $1, $2}
	END {printf "mean: plain %.0f, idem %.0f tps: idem/plain %.1f%%\n",
		tps["plain"]/n["plain"], tps["idem"]/n["idem"], 100*tps["idem"]/n["idem"]/(tps["plain"]/n["plain"])}'
