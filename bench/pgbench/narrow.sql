-- idem.sql with one outbox message enqueued in the payment's transaction,
-- as Outbox.Enqueue sends it (package outbox): one row of the narrow table
-- idem_outbox_enqueued, whose only index is its primary key (the message's
-- Idempotency-Key), with its ID from River's job ID sequence and
-- ON CONFLICT DO NOTHING (Enqueue is idempotent by key); and a pg_notify
-- that wakes the relay (Enqueue sends at most one per FetchCooldown and
-- Outbox; this script sends one per transaction, an upper bound). The
-- message is outbox.sql's. Without the notification, this is the narrow
-- insert's bound (issue 34). Made by bench/pgbench-outbox.sh, which applies
-- the outbox's schema with its Migrate. "-- drop:" markers as in idem.sql.
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
INSERT INTO idem_outbox_enqueued (key, id, message)
VALUES ('ob1-' || encode(sha256(int8send(:k)), 'hex'), nextval('river_job_id_seq'), ('{"name":"payment.created","method":"POST","url":"http://127.0.0.1:8090/v1/notifications","header":{"Content-Type":["application/json"]},"body":"eyJldmVudCI6InBheW1lbnQuY3JlYXRlZCIsInBheW1lbnRfaWQiOiJwYXlfMTIzNDU2Nzg5MCIsInRlbmFudCI6ImFjbWUiLCJhY2NvdW50X2lkIjoiYWNjLTEiLCJhbW91bnRfY2VudHMiOjEyNTAsImN1cnJlbmN5IjoiRVVSIn0=","key":"ob1-' || encode(sha256(int8send(:k)), 'hex') || '"}')::jsonb)
ON CONFLICT (key) DO NOTHING RETURNING id;
-- drop:notify
SELECT pg_notify('idem_outbox_' || 'idem_outbox_enqueued'::regclass::oid, '');
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
