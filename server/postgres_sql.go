package server

// The SQL of PostgresStore. Every time is judged by the database clock,
// statement_timestamp() plus the store's clock offset (zero outside tests),
// which is always the last argument and named "clock" below.

// sqlSaveLockTimeout bounds the lock waits of a claim by the wait bound ($1),
// keeping the session's own lock_timeout to restore: a claim that waits on
// another request's open transaction gives up at the bound (SQLSTATE 55P03).
const sqlSaveLockTimeout = `SELECT set_config('lock_timeout', $1, true)
FROM (SELECT set_config('idem.saved_lock_timeout', current_setting('lock_timeout'), true)) AS saved`

// sqlRestoreLockTimeout gives the handler the lock_timeout it would have had.
const sqlRestoreLockTimeout = `SELECT set_config('lock_timeout', current_setting('idem.saved_lock_timeout'), true)`

// claimColumns are the arguments of sqlInsert and sqlReclaim: $1 scope_hash,
// $2 tenant, $3 principal, $4 route, $5 key, $6 fp_alg, $7 fingerprint,
// $8 token, $9 lease (NULL in Transactional mode), $10 retention, $11 clock.
const sqlInsert = `INSERT INTO idem_records AS r (scope_hash, tenant, principal, route, idem_key,
    fp_alg, fingerprint, state, token, attempt, locked_until, created_at, expires_at)
SELECT $1, $2, $3, $4, $5, $6, $7, 'running', $8, 1, clock.t + $9::interval, clock.t, clock.t + $10::interval
FROM (SELECT statement_timestamp() + $11::interval AS t) AS clock
ON CONFLICT (scope_hash) DO NOTHING
RETURNING true`

// sqlReclaim claims a record whose retention has passed: it counts as absent.
const sqlReclaim = `UPDATE idem_records AS r SET tenant = $2, principal = $3, route = $4, idem_key = $5,
    fp_alg = $6, fingerprint = $7, state = 'running', token = $8, attempt = 1,
    locked_until = clock.t + $9::interval, recovery_point = NULL, recovery_data = NULL,
    status = NULL, headers = NULL, body = NULL, created_at = clock.t, expires_at = clock.t + $10::interval
FROM (SELECT statement_timestamp() + $11::interval AS t) AS clock
WHERE r.scope_hash = $1 AND r.expires_at <= clock.t
RETURNING true`

// sqlSelect reads a record: $1 scope_hash, $2 clock.
const sqlSelect = `SELECT fp_alg, fingerprint, state, token, attempt, expires_at <= clock.t,
    (extract(epoch FROM locked_until - clock.t) * 1000000)::bigint, status, headers, body
FROM idem_records, (SELECT statement_timestamp() + $2::interval AS t) AS clock
WHERE scope_hash = $1`

// sqlTakeover takes over an expired lease held by token $5: $1 scope_hash,
// $2 new token, $3 lease (NULL in Transactional mode), $4 clock.
const sqlTakeover = `UPDATE idem_records AS r SET token = $2, attempt = r.attempt + 1,
    locked_until = clock.t + $3::interval
FROM (SELECT statement_timestamp() + $4::interval AS t) AS clock
WHERE r.scope_hash = $1 AND r.token = $5 AND r.state = 'running'
    AND r.locked_until <= clock.t AND r.expires_at > clock.t
RETURNING r.attempt, r.recovery_point, r.recovery_data`

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
