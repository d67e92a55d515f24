-- Fills idem_records for bench/pgbench-scale.sh: :rows done records of
-- the size of the payments example's (a 32-byte scope hash and
-- fingerprint, a uuid key, a JSON payment of about 150 bytes), created
-- over the last 24 hours and expiring over the next 24, except the first
-- :expired, which expired in the last hour, oldest first: the backlog
-- that sweep.sql deletes. The scope hashes are of negative numbers, so
-- that idem.sql's (of positive ones) never collide with them.
INSERT INTO idem_records (scope_hash, tenant, principal, route, idem_key, fp_alg, fingerprint,
    state, token, attempt, status, headers, body, created_at, expires_at)
SELECT sha256(int8send(-g)), 'bench', 'client', 'POST /v1/payments', md5(g::text)::uuid::text,
    'sha256-v2', sha256(int8send(g)), 'done', gen_random_uuid(), 1, 201,
    '\x00010c436f6e74656e742d54797065010010617070'::bytea,
    convert_to(format('{"payment_id":"pay_%s","account_id":"acct-%s","amount_cents":%s,"currency":"EUR","balance_cents":1152921504606846975,"reference":"order-%s"}',
        substr(md5(g::text), 1, 16), g % 1000, 1 + g % 97, g), 'UTF8'),
    e - interval '24 hours', e
FROM generate_series(1, :rows) AS g,
    LATERAL (SELECT CASE WHEN g <= :expired THEN now() - interval '1 hour' * (1 - g::float8 / :expired)
        ELSE now() + interval '24 hours' * (g - :expired)::float8 / (:rows - :expired + 1) END) AS x(e);
VACUUM (ANALYZE) idem_records;
