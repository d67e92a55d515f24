package server

import "fmt"

// The SQL of PostgresStore. Every time is judged by the database clock,
// statement_timestamp() plus the store's clock offset (zero outside tests),
// which is always the last argument and named "clock" below.

// A claim's lock waits (on another request's open transaction, which
// holds the unique index entry it needs) are bounded by the wait bound:
// the statement sets lock_timeout, local to the transaction, before it
// inserts, keeping the session's value in idem.saved_lock_timeout, and
// puts it back in RETURNING, which runs after every wait of the statement,
// so the handler runs with its own lock_timeout. A claim that loses the
// race returns no row and leaves the bound in place for the statements
// that follow it (none follow when the transaction then rolls back). A
// wait past the bound fails with SQLSTATE 55P03.

// boundedClock is the FROM item of a bounded statement: the clock, after
// the lock_timeout switch ($12 or the last argument: the bound, "250ms").
const boundedClock = `(SELECT statement_timestamp() + %s::interval AS t
    FROM (SELECT set_config('lock_timeout', %s, true)
          FROM (SELECT set_config('idem.saved_lock_timeout', current_setting('lock_timeout'), true)) AS saved) AS bound
) AS clock`

// restoreLockTimeout is the RETURNING item that puts the session's
// lock_timeout back.
const restoreLockTimeout = `set_config('lock_timeout', current_setting('idem.saved_lock_timeout'), true)`

// sqlInsert claims a key. Its arguments (claimValues), shared with
// sqlReclaim: $1 scope_hash, $2 tenant, $3 principal, $4 route, $5 key,
// $6 fp_alg, $7 fingerprint, $8 token, $9 lease (NULL in Transactional
// mode), $10 retention, $11 clock offset, $12 wait bound.
var sqlInsert = `INSERT INTO idem_records AS r (scope_hash, tenant, principal, route, idem_key,
    fp_alg, fingerprint, state, token, attempt, locked_until, created_at, expires_at)
SELECT $1, $2, $3, $4, $5, $6, $7, 'running', $8, 1, clock.t + $9::interval, clock.t, clock.t + $10::interval
FROM ` + fmt.Sprintf(boundedClock, "$11", "$12") + `
ON CONFLICT (scope_hash) DO NOTHING
RETURNING ` + restoreLockTimeout

// sqlReclaim claims a record whose retention has passed: it counts as absent.
var sqlReclaim = `UPDATE idem_records AS r SET tenant = $2, principal = $3, route = $4, idem_key = $5,
    fp_alg = $6, fingerprint = $7, state = 'running', token = $8, attempt = 1,
    locked_until = clock.t + $9::interval, recovery_point = NULL, recovery_data = NULL,
    status = NULL, headers = NULL, body = NULL, created_at = clock.t, expires_at = clock.t + $10::interval
FROM ` + fmt.Sprintf(boundedClock, "$11", "$12") + `
WHERE r.scope_hash = $1 AND r.expires_at <= clock.t
RETURNING 1, NULL::text, NULL::jsonb, ` + restoreLockTimeout

// sqlSelect reads a record, as one row with a NULL scope_hash when there
// is none, and puts back the session's lock_timeout that a claim statement
// which returned no row left at the wait bound: $1 scope_hash, $2 clock
// offset.
const sqlSelect = `SELECT r.scope_hash IS NOT NULL, r.fp_alg, r.fingerprint, r.state, r.token, r.attempt,
    r.expires_at <= clock.t, (extract(epoch FROM r.locked_until - clock.t) * 1000000)::bigint,
    r.status, r.headers, r.body
FROM (SELECT statement_timestamp() + $2::interval AS t, set_config('lock_timeout',
        coalesce(nullif(current_setting('idem.saved_lock_timeout', true), ''), current_setting('lock_timeout')),
        true) AS restored) AS clock
LEFT JOIN idem_records AS r ON r.scope_hash = $1`

// sqlTakeover takes over an expired lease held by token $5: $1 scope_hash,
// $2 new token, $3 lease (NULL in Transactional mode), $4 clock offset,
// $6 wait bound.
var sqlTakeover = `UPDATE idem_records AS r SET token = $2, attempt = r.attempt + 1,
    locked_until = clock.t + $3::interval
FROM ` + fmt.Sprintf(boundedClock, "$4", "$6") + `
WHERE r.scope_hash = $1 AND r.token = $5 AND r.state = 'running'
    AND r.locked_until <= clock.t AND r.expires_at > clock.t
RETURNING r.attempt, r.recovery_point, r.recovery_data, ` + restoreLockTimeout

// The statements below are fenced by the attempt's token: $1 scope_hash,
// $2 token. They change nothing for a stale attempt.

// sqlComplete stores the response: $3 state, $4 status, $5 headers, $6 body.
const sqlComplete = `UPDATE idem_records SET state = $3, status = $4, headers = $5, body = $6,
    locked_until = NULL
WHERE scope_hash = $1 AND token = $2 AND state = 'running'`

// sqlExtend: $3 new lease length, $4 clock.
const sqlExtend = `UPDATE idem_records SET locked_until = statement_timestamp() + $4::interval + $3::interval
WHERE scope_hash = $1 AND token = $2 AND state = 'running'`

// sqlCheckpoint: $3 point, $4 data.
const sqlCheckpoint = `UPDATE idem_records SET recovery_point = $3, recovery_data = $4
WHERE scope_hash = $1 AND token = $2 AND state = 'running'`

// sqlRelease frees the key of a first attempt that recorded no recovery
// point: nothing it did needs reconciling.
const sqlRelease = `DELETE FROM idem_records
WHERE scope_hash = $1 AND token = $2 AND state = 'running' AND attempt = 1 AND recovery_point IS NULL`

// sqlEndLease ends the lease now, keeping the record and its recovery point
// for the next attempt to take over: $3 clock.
const sqlEndLease = `UPDATE idem_records SET locked_until = statement_timestamp() + $3::interval
WHERE scope_hash = $1 AND token = $2 AND state = 'running'`

// sqlSweep deletes at most $1 expired records, oldest first, skipping any a
// request holds: $2 clock.
const sqlSweep = `DELETE FROM idem_records WHERE scope_hash IN (
    SELECT scope_hash FROM idem_records
    WHERE expires_at <= statement_timestamp() + $2::interval
    ORDER BY expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED)`
