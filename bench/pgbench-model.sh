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
if ! [[ "$rounds $secs $clients" =~ ^([1-9][0-9]*( |$)){3}$ ]]; then
	echo "usage: bash bench/pgbench-model.sh [rounds] [seconds per run] [clients], each a positive integer" >&2
	exit 2
fi
source bench/pgbench/schema.sh
trap pgbench_drop_schema EXIT
pgbench_schema
pgbench_plain_vs_idem "$rounds" "$secs" "$clients"
