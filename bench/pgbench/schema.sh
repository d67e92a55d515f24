# Sourced by the pgbench scripts: pgbench_schema makes a schema of its own
# in DATABASE_URL's database with the store's table (server/schema.sql) and
# the payment endpoint's tables and points PGOPTIONS at it for psql and
# pgbench; pgbench_drop_schema drops it (the scripts' EXIT trap);
# pgbench_plain_vs_idem runs the payment transaction plain and as the
# middleware sends it, alternating.
pgbench_schema_name=idem_pgbench_$$

pgbench_schema() {
	: "${DATABASE_URL:?set DATABASE_URL (see README)}"
	export PGOPTIONS="-c search_path=$pgbench_schema_name -c client_min_messages=warning"
	psql -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "CREATE SCHEMA $pgbench_schema_name" >/dev/null
	psql -q -v ON_ERROR_STOP=1 "$DATABASE_URL" -f server/schema.sql >/dev/null
	psql -q -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT g, 1000000000 FROM generate_series(0, 999) AS g;
CREATE TABLE payments (id bigserial PRIMARY KEY, account_id bigint NOT NULL REFERENCES accounts,
    amount bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
SQL
}

pgbench_drop_schema() {
	PGOPTIONS="-c client_min_messages=warning" psql -q "$DATABASE_URL" \
		-c "DROP SCHEMA IF EXISTS $pgbench_schema_name CASCADE" >/dev/null
}

# pgbench_plain_vs_idem ROUNDS SECONDS CLIENTS runs plain.sql and idem.sql
# in turn, ROUNDS times, each for SECONDS at CLIENTS clients, and prints
# each run's tps and their means' ratio.
pgbench_plain_vs_idem() {
	local rounds=$1 secs=$2 clients=$3
	for _ in $(seq "$rounds"); do
		for v in plain idem; do
			printf '%s ' "$v"
			pgbench -n -M prepared -c "$clients" -j 1 -T "$secs" -f "bench/pgbench/$v.sql" "$DATABASE_URL" 2>&1 |
				awk '/^tps/ {print $3} /error|ERROR/ {print > "/dev/stderr"}'
		done
	done | awk '{tps[$1] += $2; n[$1]++; printf "%s %.0f tps\n", $1, $2}
		END {printf "mean: plain %.0f, idem %.0f tps: idem/plain %.1f%%\n",
			tps["plain"]/n["plain"], tps["idem"]/n["idem"], 100*tps["idem"]/n["idem"]/(tps["plain"]/n["plain"])}'
}
