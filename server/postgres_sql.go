package server

import "fmt"

// The SQL of PostgresStore. Every time is judged by the database clock,
// statement_timestamp() plus the store's clock offset (zero outside tests),
// which is always an argument, named "clock" below.

// Claims of one scope exclude each other with a transaction-level advisory
// lock on the scope (two int4 keys from the scope hash: the two-key lock
// space, apart from the bigint locks applications and migration tools
// mostly use; a collision of keys only makes one claim wait for another).
// A Transactional claim takes it without waiting (sqlTryLock) and holds it
// to the end of its transaction, which writes the record only when it
// commits (sqlInsertDone), once: no row is written twice, none is left
// behind by a rollback. A claim that finds the lock held waits for it, at
// most the wait bound, then reads again. Leased claims, and reclaims and
// takeovers in either mode, take the lock in the statement itself.
//
// A lock wait is bounded by the wait bound: the statement sets
// lock_timeout, local to the transaction, before it locks, keeping the
// session's value in idem.saved_lock_timeout, and puts it back after the
// lock (in RETURNING, or in the outer query), so the handler runs with its
// own lock_timeout. A claim statement that returns no row leaves the bound
// in place for the statements that follow it (sqlSelect puts it back). A
// wait past the bound fails with SQLSTATE 55P03.

// boundedLock is the FROM item that sets lock_timeout to the bound (%[3]s,
// "250ms") and takes the scope's advisory lock (%[1]s, %[2]s).
const boundedLock = `(SELECT pg_advisory_xact_lock(%[1]s, %[2]s)
    FROM (SELECT set_config('lock_timeout', %[3]s, true)
          FROM (SELECT set_config('idem.saved_lock_timeout', current_setting('lock_timeout'), true)) AS saved) AS bound
) AS locked`

// boundedClock is the FROM item of a claim statement: the clock (%[4]s),
// read after boundedLock.
const boundedClock = `(SELECT statement_timestamp() + %[4]s::interval AS t FROM ` + boundedLock + `) AS clock`

// restoreLockTimeout is the RETURNING item that puts the session's
// lock_timeout back.
const restoreLockTimeout = `set_config('lock_timeout', current_setting('idem.saved_lock_timeout'), true)`

// sqlTryLock takes the scope's advisory lock if it is free: $1, $2 lock keys.
const sqlTryLock = `SELECT pg_try_advisory_xact_lock($1, $2)`

// sqlWaitLock waits for the scope's advisory lock, at most the wait bound,
// and puts the session's lock_timeout back: $1, $2 lock keys, $3 bound.
var sqlWaitLock = `SELECT ` + restoreLockTimeout + ` FROM ` + fmt.Sprintf(boundedLock, "$1", "$2", "$3")

// sqlInsertDone writes the record of a Transactional attempt that claimed a
// new key, as its transaction commits: $1 scope_hash, $2 tenant,
// $3 principal, $4 route, $5 key, $6 fp_alg, $7 fingerprint, $8 state,
// $9 token, $10 clock offset, $11 retention, $12 status, $13 headers,
// $14 body. Its time is the transaction's start, when the key was claimed.
const sqlInsertDone = `INSERT INTO idem_records (scope_hash, tenant, principal, route, idem_key,
    fp_alg, fingerprint, state, token, attempt, created_at, expires_at, status, headers, body)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, now() + $10::interval, now() + $10::interval + $11::interval, $12, $13, $14)`

// sqlInsert claims a key in Leased mode. Its arguments (claimValues),
// shared with sqlReclaim: $1 scope_hash, $2 tenant, $3 principal, $4 route,
// $5 key, $6 fp_alg, $7 fingerprint, $8 token, $9 lease (NULL in
// Transactional mode), $10 retention, $11 clock offset, $12 wait bound,
// $13 and $14 lock keys.
var sqlInsert = `INSERT INTO idem_records AS r (scope_hash, tenant, principal, route, idem_key,
    fp_alg, fingerprint, state, token, attempt, locked_until, created_at, expires_at)
SELECT $1, $2, $3, $4, $5, $6, $7, 'running', $8, 1, clock.t + $9::interval, clock.t, clock.t + $10::interval
FROM ` + fmt.Sprintf(boundedClock, "$13", "$14", "$12", "$11") + `
ON CONFLICT (scope_hash) DO NOTHING
RETURNING ` + restoreLockTimeout

// sqlReclaim claims a record whose retention has passed: it counts as absent.
var sqlReclaim = `UPDATE idem_records AS r SET tenant = $2, principal = $3, route = $4, idem_key = $5,
    fp_alg = $6, fingerprint = $7, state = 'running', token = $8, attempt = 1,
    locked_until = clock.t + $9::interval, recovery_point = NULL, recovery_data = NULL,
    status = NULL, headers = NULL, body = NULL, created_at = clock.t, expires_at = clock.t + $10::interval
FROM ` + fmt.Sprintf(boundedClock, "$13", "$14", "$12", "$11") + `
WHERE r.scope_hash = $1 AND r.expires_at <= clock.t
RETURNING 1, NULL::text, NULL::jsonb, ` + restoreLockTimeout

// recordColumns are the columns of sqlSelect: a record, as one row with a
// NULL scope_hash when there is none.
const recordColumns = `r.scope_hash IS NOT NULL, r.fp_alg, r.fingerprint, r.state, r.token, r.attempt,
    r.expires_at <= clock.t, (extract(epoch FROM r.locked_until - clock.t) * 1000000)::bigint,
    r.status, r.headers, r.body`

// sqlRead reads a record, no row when there is none, in a plain index
// scan: $1 scope_hash, $2 clock offset.
const sqlRead = `SELECT true, r.fp_alg, r.fingerprint, r.state, r.token, r.attempt,
    r.expires_at <= statement_timestamp() + $2::interval,
    (extract(epoch FROM r.locked_until - (statement_timestamp() + $2::interval)) * 1000000)::bigint,
    r.status, r.headers, r.body
FROM idem_records AS r WHERE r.scope_hash = $1`

// sqlSelect is sqlRead that also puts back the session's lock_timeout that
// a claim statement which returned no row left at the wait bound. It runs
// as a statement of its own, after the lock, so that it sees a record that
// committed while the claim waited.
const sqlSelect = `SELECT ` + recordColumns + `
FROM (SELECT statement_timestamp() + $2::interval AS t, set_config('lock_timeout',
        coalesce(nullif(current_setting('idem.saved_lock_timeout', true), ''), current_setting('lock_timeout')),
        true) AS restored) AS clock
LEFT JOIN idem_records AS r ON r.scope_hash = $1`

// sqlTakeover takes over an expired lease held by token $5: $1 scope_hash,
// $2 new token, $3 lease (NULL in Transactional mode), $4 clock offset,
// $6 wait bound, $7 and $8 lock keys.
var sqlTakeover = `UPDATE idem_records AS r SET token = $2, attempt = r.attempt + 1,
    locked_until = clock.t + $3::interval
FROM ` + fmt.Sprintf(boundedClock, "$7", "$8", "$6", "$4") + `
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
