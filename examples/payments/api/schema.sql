-- The tables of the payments example. api.Migrate applies this file after
-- server.Migrate; it is idempotent, and safe to run from several nodes at
-- once (an advisory lock serialises them).
CREATE TABLE IF NOT EXISTS accounts (
    tenant        text        NOT NULL,
    id            text        NOT NULL,
    currency      text        NOT NULL,
    balance_cents bigint      NOT NULL CHECK (balance_cents >= 0),
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, id)
);

-- One row per payment that took effect: the ground truth the demo's
-- checker reads. reference is the client's label (not unique: telling
-- retries apart is the Idempotency-Key's job); idempotency_key is NULL for
-- a request without one.
CREATE TABLE IF NOT EXISTS payments (
    id              text        PRIMARY KEY,
    tenant          text        NOT NULL,
    account_id      text        NOT NULL,
    amount_cents    bigint      NOT NULL CHECK (amount_cents > 0),
    currency        text        NOT NULL,
    balance_cents   bigint      NOT NULL,
    reference       text,
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    FOREIGN KEY (tenant, account_id) REFERENCES accounts (tenant, id)
);
-- Created only when missing: CREATE INDEX IF NOT EXISTS locks the table
-- even when the index exists, and would make a node's start wait for the
-- payments in flight (or for a node that stalls in one).
DO $$
BEGIN
    IF to_regclass(format('%I.payments_account', current_schema())) IS NULL THEN
        CREATE INDEX payments_account ON payments (tenant, account_id);
    END IF;
END $$;

-- One row per gateway charge credited to an account: the unique
-- gateway_charge_id makes a second recording of the same charge (after a
-- takeover) a no-op.
CREATE TABLE IF NOT EXISTS charges (
    id                text        PRIMARY KEY,
    tenant            text        NOT NULL,
    account_id        text        NOT NULL,
    amount_cents      bigint      NOT NULL CHECK (amount_cents > 0),
    currency          text        NOT NULL,
    balance_cents     bigint      NOT NULL,
    gateway_charge_id text        NOT NULL UNIQUE,
    idempotency_key   text,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    FOREIGN KEY (tenant, account_id) REFERENCES accounts (tenant, id)
);
