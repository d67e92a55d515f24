-- The idempotency records of github.com/idemkit/idem/server, one per
-- (tenant, principal, route, key). server.Migrate applies this file; it is
-- idempotent, and safe to run from several nodes at once.
CREATE TABLE IF NOT EXISTS idem_records (
    -- SHA-256 of (tenant, principal, route, key): index keys stay 32 bytes.
    scope_hash     bytea       PRIMARY KEY CHECK (octet_length(scope_hash) = 32),
    -- The scope in clear, for people reading the table.
    tenant         text        NOT NULL,
    principal      text        NOT NULL,
    route          text        NOT NULL,
    idem_key       text        NOT NULL,
    -- The request's fingerprint and the algorithm that made it (sha256-v1).
    fp_alg         text        NOT NULL,
    fingerprint    bytea       NOT NULL,
    -- running: claimed; done: response stored; unavailable: effects
    -- committed, response not stored (too large or streamed).
    state          text        NOT NULL CHECK (state IN ('running', 'done', 'unavailable')),
    -- Fencing token of the current attempt; attempt counts takeovers.
    token          uuid        NOT NULL,
    attempt        integer     NOT NULL,
    -- Leased mode: the end of the current lease (database clock).
    locked_until   timestamptz,
    -- Leased mode: the last recovery point an attempt recorded.
    recovery_point text,
    recovery_data  jsonb,
    -- The stored response: status, allowlisted headers, body byte for byte
    -- (bytea, never jsonb, which would reorder keys).
    status         integer,
    headers        jsonb,
    body           bytea,
    created_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL
) WITH (fillfactor = 90);

CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);
