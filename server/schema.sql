-- The idempotency records of github.com/idemkit/idem/server, one per
-- (tenant, principal, route, key). server.Migrate applies this file; it is
-- idempotent, and safe to run from several nodes at once, and while other
-- nodes serve: on a table that is up to date it takes no lock on the table
-- (CREATE TABLE IF NOT EXISTS takes none; the block below changes nothing). There are no
-- CHECK constraints: Postgres parses and plans them again for every
-- statement that writes a row, a cost on every request, and only the store
-- writes this table (32-byte scope hashes; states running, done,
-- unavailable, uncertain and not-applied).
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
    -- effects committed, response not stored (too large or streamed);
    -- uncertain: not known at the reconciler's MaxAge, kept until an
    -- operator resolves it; not-applied: so resolved, the key is free.
    state          text        NOT NULL,
    -- Fencing token of the current attempt; attempt counts takeovers.
    token          uuid        NOT NULL,
    attempt        integer     NOT NULL,
    -- Leased mode: the end of the current lease (database clock).
    locked_until   timestamptz,
    -- Leased mode: the last recovery point an attempt recorded.
    recovery_point text,
    recovery_data  jsonb,
    -- The stored response: its status, and in headers the whole response
    -- (status, allowlisted headers, body byte for byte) in the stored form
    -- of every store, server.Response.MarshalBinary (bytea, never jsonb,
    -- which would reorder keys and cannot hold a header value that is not
    -- UTF-8). body is NULL but in records of earlier versions, whose
    -- headers column holds the header block alone (postgres_response.go).
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
    reconcile_at   timestamptz,
    -- Who resolved an uncertain operation, when and why.
    resolved_by    text,
    resolved_at    timestamptz,
    resolve_reason text
) WITH (fillfactor = 90);

-- The rest brings an existing table up to date, and returns at once when
-- it is: CREATE INDEX IF NOT EXISTS and ALTER TABLE lock the table even
-- when they change nothing, which would make every node's start wait for
-- the requests in flight, and hold new ones behind it. When there is work,
-- the table is locked once, in the strongest mode needed, before the first
-- change: taking a weaker lock and then a stronger one deadlocks against a
-- request that read the table and then writes it.
--
-- The steps: the expiry index of the sweeper; the columns of the
-- reconciler (request, reconcile_at) and the index by which reconcilers
-- find abandoned operations (only running records, which Transactional
-- requests never commit); the columns of a resolution and the index of
-- the uncertain records, which operators list; and the headers of versions before the binary
-- block, stored as jsonb, which become bytea holding that JSON's text
-- (decodeHeader still reads it), so that their records keep replaying.
DO $$
DECLARE
    tbl regclass := format('%I.idem_records', current_schema())::regclass;
BEGIN
    IF to_regclass(format('%I.idem_records_expires_at', current_schema())) IS NOT NULL
        AND to_regclass(format('%I.idem_records_running', current_schema())) IS NOT NULL
        AND to_regclass(format('%I.idem_records_uncertain', current_schema())) IS NOT NULL
        AND (SELECT count(*) FROM pg_attribute
             WHERE attrelid = tbl AND attname IN ('request', 'reconcile_at', 'resolved_by', 'resolved_at', 'resolve_reason')
                 AND NOT attisdropped) = 5
        AND (SELECT atttypid FROM pg_attribute
             WHERE attrelid = tbl AND attname = 'headers') = 'bytea'::regtype THEN
        RETURN;
    END IF;
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
    CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);
    ALTER TABLE idem_records ADD COLUMN IF NOT EXISTS request bytea;
    ALTER TABLE idem_records ADD COLUMN IF NOT EXISTS reconcile_at timestamptz;
    CREATE INDEX IF NOT EXISTS idem_records_running ON idem_records (locked_until) WHERE state = 'running';
    ALTER TABLE idem_records ADD COLUMN IF NOT EXISTS resolved_by text;
    ALTER TABLE idem_records ADD COLUMN IF NOT EXISTS resolved_at timestamptz;
    ALTER TABLE idem_records ADD COLUMN IF NOT EXISTS resolve_reason text;
    CREATE INDEX IF NOT EXISTS idem_records_uncertain ON idem_records (created_at) WHERE state = 'uncertain';
    IF (SELECT atttypid FROM pg_attribute WHERE attrelid = tbl AND attname = 'headers') = 'jsonb'::regtype THEN
        ALTER TABLE idem_records ALTER COLUMN headers TYPE bytea USING convert_to(headers::text, 'UTF8');
    END IF;
END $$;
