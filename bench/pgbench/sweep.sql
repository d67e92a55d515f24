-- One batch of server.RunSweeper (server/postgres_sql.go, sqlSweep, with
-- no clock offset) of :batch records (pgbench -D batch=N), for
-- bench/pgbench-scale.sh.
DELETE FROM idem_records WHERE scope_hash IN (
    SELECT scope_hash FROM idem_records
    WHERE expires_at <= statement_timestamp()
        AND (locked_until IS NULL OR locked_until <= statement_timestamp())
    ORDER BY expires_at
    LIMIT :batch
    FOR UPDATE SKIP LOCKED);
