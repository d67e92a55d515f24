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
// most the wait bound (sqlWaitLock), then reads again; it reclaims an
// expired record or takes over an expired lease only while it holds the
// lock. Leased claims run in autocommit and take the lock in the claim
// statement itself (boundedLock).
//
// A lock wait is bounded by setting lock_timeout, local to the
// transaction, before the lock; a wait past it fails with SQLSTATE 55P03.
// A Leased statement is its own transaction, so the setting ends with it.
// sqlWaitLock, inside the claim's transaction, puts back the value it
// found, so that the handler runs with its own lock_timeout; when it fails,
// the transaction is rolled back, and the setting with it.

// boundedLock is the FROM item that takes the scope's advisory lock
// (%[1]s, %[2]s), first setting lock_timeout to the bound (%[3]s, "250ms")
// unless the bound is NULL: a [Transactional] reclaim or takeover holds the
// lock already.
const boundedLock = `(SELECT pg_advisory_xact_lock(%[1]s, %[2]s)
    FROM (SELECT CASE WHEN %[3]s::text IS NOT NULL THEN set_config('lock_timeout', %[3]s, true) END) AS bound
) AS locked`

// boundedClock is the FROM item of a claim statement: the clock (%[4]s),
// read after boundedLock.
const boundedClock = `(SELECT statement_timestamp() + %[4]s::interval AS t FROM ` + boundedLock + `) AS clock`

// sqlTryLock takes the scope's advisory lock if it is free: $1, $2 lock
// keys. It also marks the transaction as the claim's (txMarker), whether
// or not it got the lock: the record is written only in a transaction so
// marked, so a handler that ended the claim's transaction with SQL of its
// own and began another ("COMMIT; BEGIN", even through the connection) can
// never get its response stored as if it had committed with its effects.
const sqlTryLock = `SELECT pg_try_advisory_xact_lock($1, $2), set_config('` + txMarker + `', 'on', true)`

// txMarker is the transaction-local setting by which the statements that
// write a [Transactional] record know they run in the claim's transaction.
const txMarker = "idem.claim"

// inClaimTx is the condition of a [Transactional] record's write.
const inClaimTx = `current_setting('` + txMarker + `', true) = 'on'`

// sqlWaitLock waits for the scope's advisory lock, at most the wait bound,
// and puts the lock_timeout it found back: $1, $2 lock keys, $3 bound. The
// value is read in a subquery of its own (OFFSET 0 keeps the planner from
// merging it into the one that sets the bound).
const sqlWaitLock = `SELECT set_config('lock_timeout', locked.saved, true)
FROM (SELECT pg_advisory_xact_lock($1, $2), bound.saved
    FROM (SELECT set_config('lock_timeout', $3, true), saved.v AS saved
        FROM (SELECT current_setting('lock_timeout') AS v OFFSET 0) AS saved) AS bound) AS locked`

// sqlInsertDone writes the record of a [Transactional] attempt that claimed a
// new key, as its transaction commits (insertDoneParams): $1 to $7 the
// record's scope as sqlInsert's, $8 token, $9 clock offset, $10 retention,
// then the response's columns as sqlComplete's $3 to $5: $11 state,
// $12 status, $13 headers (postgres_response.go). Its time is the
// transaction's start, when the key was claimed.
const sqlInsertDone = sqlInsertRecord + `
WHERE ` + inClaimTx

// sqlInsertRecord is sqlInsertDone in any transaction: the app's own, which
// a handler stores its response in (StoreInTx), with the same arguments.
const sqlInsertRecord = `INSERT INTO idem_records (scope_hash, tenant, principal, route, idem_key,
    fp_alg, fingerprint, token, attempt, created_at, expires_at, state, status, headers)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, 1, now() + $9::interval, now() + $9::interval + $10::interval, $11, $12, $13`

// sqlInsert claims a key in [Leased] mode. Its arguments (claimValues),
// shared with sqlReclaim: $1 scope_hash, $2 tenant, $3 principal, $4 route,
// $5 key, $6 fp_alg, $7 fingerprint, $8 token, $9 lease, $10 retention,
// $11 clock offset, $12 wait bound, $13 and $14 lock keys, $15 request
// (NULL in [Transactional] mode).
var sqlInsert = `INSERT INTO idem_records AS r (scope_hash, tenant, principal, route, idem_key,
    fp_alg, fingerprint, state, token, attempt, locked_until, created_at, expires_at, request)
SELECT $1, $2, $3, $4, $5, $6, $7, 'running', $8, 1, clock.t + $9::interval, clock.t, clock.t + $10::interval, $15
FROM ` + fmt.Sprintf(boundedClock, "$13", "$14", "$12", "$11") + `
ON CONFLICT (scope_hash) DO NOTHING
RETURNING true`

// sqlReclaim claims a record whose retention has passed: it counts as
// absent. In [Transactional] mode the lease ($9) and the wait bound ($12)
// are NULL.
var sqlReclaim = `UPDATE idem_records AS r SET tenant = $2, principal = $3, route = $4, idem_key = $5,
    fp_alg = $6, fingerprint = $7, state = 'running', token = $8, attempt = 1,
    locked_until = clock.t + $9::interval, recovery_point = NULL, recovery_data = NULL,
    status = NULL, headers = NULL, body = NULL, created_at = clock.t, expires_at = clock.t + $10::interval,
    request = $15, reconcile_at = NULL, resolved_by = NULL, resolved_at = NULL, resolve_reason = NULL
FROM ` + fmt.Sprintf(boundedClock, "$13", "$14", "$12", "$11") + `
WHERE r.scope_hash = $1 AND r.expires_at <= clock.t AND r.state <> 'uncertain'
RETURNING 1, NULL::text, NULL::jsonb`

// sqlTakeover takes over an expired lease held by token $5: $1 scope_hash,
// $2 new token, $3 lease, $4 clock offset, $6 wait bound, $7 and $8 lock
// keys, $9 retention; in [Transactional] mode the lease and the wait bound
// are NULL. The record then answers retries for a full retention from the
// takeover: an operation that is still being attempted is not forgotten.
var sqlTakeover = `UPDATE idem_records AS r SET token = $2, attempt = r.attempt + 1,
    locked_until = clock.t + $3::interval, expires_at = greatest(r.expires_at, clock.t + $9::interval)
FROM ` + fmt.Sprintf(boundedClock, "$7", "$8", "$6", "$4") + `
WHERE r.scope_hash = $1 AND r.token = $5 AND r.state = 'running'
    AND r.locked_until <= clock.t AND r.expires_at > clock.t
RETURNING r.attempt, r.recovery_point, r.recovery_data`

// The statements below are fenced by the attempt's token: $1 scope_hash,
// $2 token. They change nothing for a stale attempt.

// sqlComplete stores the response: $3 state, $4 status, $5 headers
// (responseValues); body is NULL but in records of earlier versions
// (postgres_response.go).
const sqlComplete = `UPDATE idem_records SET state = $3, status = $4, headers = $5, body = NULL,
    locked_until = NULL
WHERE scope_hash = $1 AND token = $2 AND state = 'running'`

// sqlCompleteTx is sqlComplete for a [Transactional] attempt that reclaimed
// or took over a record: it writes only in the claim's transaction.
const sqlCompleteTx = sqlComplete + ` AND ` + inClaimTx

// sqlExtend: $3 new lease length, $4 clock, $5 margin. The record's
// expiry stays at least the margin (the configured lease) past the new end
// of the lease, so that a retry after the lease ends still finds the record
// and its recovery point.
const sqlExtend = `UPDATE idem_records SET locked_until = statement_timestamp() + $4::interval + $3::interval,
    expires_at = greatest(expires_at, statement_timestamp() + $4::interval + $3::interval + $5::interval)
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
// request holds, any whose lease is live and any uncertain one: $2 clock.
const sqlSweep = `DELETE FROM idem_records WHERE scope_hash IN (
    SELECT scope_hash FROM idem_records
    WHERE expires_at <= statement_timestamp() + $2::interval
        AND (locked_until IS NULL OR locked_until <= statement_timestamp() + $2::interval)
        AND state <> 'uncertain'
    ORDER BY expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED)`
