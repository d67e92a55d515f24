# Sourced by the pgbench scripts: pgbench_schema makes a schema of its own
# in DATABASE_URL's database with the store's table (server/schema.sql) and
# the payment endpoint's tables and points PGOPTIONS at it for psql and
# pgbench; pgbench_drop_schema drops it (the scripts' EXIT trap).
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
