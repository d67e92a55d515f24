-- The same transaction behind server.Middleware in Transactional mode, as
-- its SQL reaches Postgres for a new key: BEGIN, the scope's advisory lock
-- and the record's read in one round trip; the handler's two statements;
-- the record's insert and COMMIT in one round trip. The record is the size
-- of the benchmark's (a 32-byte scope hash and fingerprint, a 56-byte
-- body); the hashes are made by sha256() here, in Go by the middleware.
-- bench/pgbench-statements.sh drops the statement after a "-- drop:"
-- marker to price it.
\set acct random(0, 999)
\set k random(1, 9000000000000000000)
\set la random(-2000000000, 2000000000)
\startpipeline
BEGIN;
-- drop:lock
SELECT pg_try_advisory_xact_lock(:la, 7), set_config('idem.claim', 'on', true);
-- drop:read
SELECT r.fp_alg, r.fingerprint, r.state, r.token, r.expires_at <= statement_timestamp(),
    (extract(epoch FROM r.locked_until - statement_timestamp()) * 1000000)::bigint,
    r.status, r.headers, r.body
FROM idem_records AS r WHERE r.scope_hash = sha256(int8send(:k));
\endpipeline
UPDATE accounts SET balance = balance - 1 WHERE id = :acct;
INSERT INTO payments (account_id, amount) VALUES (:acct, 1) RETURNING id;
\startpipeline
-- drop:record
INSERT INTO idem_records (scope_hash, tenant, principal, route, idem_key, fp_alg, fingerprint,
    state, token, attempt, created_at, expires_at, status, headers, body)
SELECT sha256(int8send(:k)), '', '', 'POST /v1/payments', '7f3c9a52-6d1e-4b8a-9c0f-2e5d7a1b3c4d',
    'sha256-v3', sha256(int8send(:acct)), 'done', '7f3c9a52-6d1e-4b8a-9c0f-2e5d7a1b3c4d', 1,
    now(), now() + '24 hours'::interval, 201, '\x00010c436f6e74656e742d54797065010010617070'::bytea,
    convert_to('{"id":123456,"account":123,"amount":1250,"status":"paid"}', 'UTF8')
WHERE current_setting('idem.claim', true) = 'on';
COMMIT;
\endpipeline
