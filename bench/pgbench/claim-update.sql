-- The design that issue 5 sketched, for comparison with idem.sql: the
-- claim inserts the record at once (INSERT ... ON CONFLICT DO NOTHING,
-- with BEGIN in one round trip), and the result is written into it by an
-- UPDATE before COMMIT. The same payment and a record of the same size.
\set acct random(0, 999)
\set k random(1, 9000000000000000000)
\startpipeline
BEGIN;
INSERT INTO idem_records (scope_hash, tenant, principal, route, idem_key, fp_alg, fingerprint,
    state, token, attempt, created_at, expires_at)
VALUES (sha256(int8send(:k)), '', '', 'POST /v1/payments', '7f3c9a52-6d1e-4b8a-9c0f-2e5d7a1b3c4d',
    'sha256-v2', sha256(int8send(:acct)), 'running', '7f3c9a52-6d1e-4b8a-9c0f-2e5d7a1b3c4d', 1,
    now(), now() + '24 hours'::interval)
ON CONFLICT (scope_hash) DO NOTHING RETURNING true;
\endpipeline
UPDATE accounts SET balance = balance - 1 WHERE id = :acct;
INSERT INTO payments (account_id, amount) VALUES (:acct, 1) RETURNING id;
\startpipeline
UPDATE idem_records SET state = 'done', status = 201,
    headers = '\x00010c436f6e74656e742d54797065010010617070'::bytea,
    body = convert_to('{"id":123456,"account":123,"amount":1250,"status":"paid"}', 'UTF8')
WHERE scope_hash = sha256(int8send(:k)) AND token = '7f3c9a52-6d1e-4b8a-9c0f-2e5d7a1b3c4d'
    AND state = 'running';
COMMIT;
\endpipeline
