-- The idempotency records of github.com/idemkit/idem/server, one per
-- (tenant, principal, route, key). server.Migrate applies this file; it is
-- idempotent, and safe to run from several nodes at once. There are no
-- CHECK constraints: Postgres parses and plans them again for every
-- statement that writes a row, a cost on every request, and only the store
-- writes this table (32-byte scope hashes; states running, done and
-- unavailable).
CREATE TABLE IF NOT EXISTS idem_records (
    -- SHA-256 of (tenant, principal, route, key): index keys stay 32 bytes.
    scope_hash     bytea       PRIMARY KEY,
    -- The scope in clear, for people reading the table.
    tenant         text        NOT NULL,
    principal      text        NOT NULL,
    route          text        NOT NULL,
    idem_key       text        NOT NULL,
    -- The request's fingerprint and the algorithm that made it (sha256-v2;
    -- sha256-v1 for records of versions that left out the path under a
    -- catch-all pattern).
    fp_alg         text        NOT NULL,
    fingerprint    bytea       NOT NULL,
    -- running: claimed (Leased mode); done: response stored; unavailable:
    -- effects committed, response not stored (too large or streamed).
    state          text        NOT NULL,
    -- Fencing token of the current attempt; attempt counts takeovers.
    token          uuid        NOT NULL,
    attempt        integer     NOT NULL,
    -- Leased mode: the end of the current lease (database clock).
    locked_until   timestamptz,
    -- Leased mode: the last recovery point an attempt recorded.
    recovery_point text,
    recovery_data  jsonb,
    -- The stored response: status, allowlisted headers, body byte for byte
    -- (bytea, never jsonb, which would reorder keys). The headers are a
    -- binary block (a format byte, then length-prefixed names and values),
    -- because a field value may hold bytes that jsonb cannot.
    status         integer,
    headers        bytea,
    body           bytea,
    created_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    -- Leased mode: the request as the handler saw it (method, path and
    -- query, pattern, path values, Content-Type and the fingerprinted
    -- headers, body), for a reconciler.
    request        bytea,
    -- Leased mode: when a reconciler looks at an abandoned operation next
    -- (NULL: as soon as its lease has ended).
    reconcile_at   timestamptz
) WITH (fillfactor = 90);

CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);

-- Tables of versions before the reconciler gain its columns (no-ops on a
-- new table), and the index by which reconcilers find abandoned operations:
-- only running records, which Transactional requests never commit.
ALTER TABLE idem_records ADD COLUMN IF NOT EXISTS request bytea;
ALTER TABLE idem_records ADD COLUMN IF NOT EXISTS reconcile_at timestamptz;
CREATE INDEX IF NOT EXISTS idem_records_running ON idem_records (locked_until) WHERE state = 'running';

-- Versions before the binary header block stored the headers as jsonb. The
-- column becomes bytea holding that JSON's text, which decodeHeader still
-- reads, so that their records keep replaying. A no-op on a new table.
DO $$
BEGIN
    IF (SELECT a.atttypid FROM pg_attribute AS a
        WHERE a.attrelid = 'idem_records'::regclass AND a.attname = 'headers') = 'jsonb'::regtype THEN
        ALTER TABLE idem_records ALTER COLUMN headers TYPE bytea USING convert_to(headers::text, 'UTF8');
    END IF;
END $$;
