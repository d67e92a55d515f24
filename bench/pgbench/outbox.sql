-- idem.sql with one outbox message enqueued in the payment's transaction,
-- as River's InsertTx sends it for the outbox (package outbox): the job row
-- with its unique key (the message's Idempotency-Key) through River's
-- insert statement (its ON CONFLICT on the unique key included), and a
-- pg_notify of the insert (River sends at most one per FetchCooldown and
-- client; this script sends one per transaction, an upper bound). Made by
-- bench/pgbench-outbox.sh, which applies River's schema with the outbox's
-- Migrate. "-- drop:" markers as in idem.sql.
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
-- drop:outbox
INSERT INTO river_job (args, created_at, kind, max_attempts, metadata, priority, queue, scheduled_at, state, tags, unique_key, unique_states)
VALUES (('{"name":"payment.created","method":"POST","url":"http://127.0.0.1:8090/v1/notifications","header":{"Content-Type":["application/json"]},"body":"eyJldmVudCI6InBheW1lbnQuY3JlYXRlZCIsInBheW1lbnRfaWQiOiJwYXlfMTIzNDU2Nzg5MCIsInRlbmFudCI6ImFjbWUiLCJhY2NvdW50X2lkIjoiYWNjLTEiLCJhbW91bnRfY2VudHMiOjEyNTAsImN1cnJlbmN5IjoiRVVSIn0=","key":"ob1-' || encode(sha256(int8send(:k)), 'hex') || '"}')::jsonb,
    now(), 'idem_outbox_message', 30000, '{}'::jsonb, 1, 'idem_outbox', now(), 'available', '{}'::varchar(255)[],
    sha256(int8send(:k) || '\x01'::bytea), B'11111111')
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL AND river_job_state_in_bitmask(unique_states, state)
DO UPDATE SET kind = river_job.kind
RETURNING river_job.id, river_job.args, river_job.attempt, river_job.attempted_at, river_job.attempted_by, river_job.created_at,
    river_job.errors, river_job.finalized_at, river_job.kind, river_job.max_attempts, river_job.metadata, river_job.priority,
    river_job.queue, river_job.state, river_job.scheduled_at, river_job.tags, river_job.unique_key, river_job.unique_states,
    (xmax != 0) AS unique_skipped_as_duplicate;
-- drop:notify
SELECT pg_notify(current_schema() || '.river_insert', '{"queue":"idem_outbox"}');
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
