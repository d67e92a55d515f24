package mysqlidem

// The SQL of Store. Every time is the database's: UTC_TIMESTAMP(6) plus
// the store's clock offset in microseconds (zero outside tests), which is
// an argument wherever now appears (the same value within one statement).
const now = `(UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`

// recordColumns are the columns a claim writes.
const recordColumns = `(scope_hash, tenant, principal, route, idem_key, fp_alg, fingerprint,
    state, token, attempt, locked_until, created_at, expires_at, request)`

// sqlInsertLeased claims a new key in Leased mode, in autocommit: one row
// when it was absent, none (a duplicate, ignored) when it exists. Args:
// scope, tenant, principal, route, key, fp_alg, fingerprint, token, then
// offset and lease, offset, offset and retention, request.
const sqlInsertLeased = `INSERT IGNORE INTO idem_records ` + recordColumns + `
VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, 1, ` + now + ` + INTERVAL ? MICROSECOND, ` + now + `,
    ` + now + ` + INTERVAL ? MICROSECOND, ?)`

// sqlClaimTx claims a key in the Transactional claim's transaction, with
// sqlInsertLeased's arguments (lease and request NULL). On a new key it
// inserts the running row, whose exclusive lock the transaction holds to
// its end; on an existing one it changes nothing and takes the row's
// exclusive record lock (ON DUPLICATE KEY UPDATE takes an exclusive lock
// where a plain INSERT's duplicate check takes a shared one), waiting for
// a transaction that holds it. Duplicates thus queue on one lock, and none
// upgrades a shared lock to an exclusive one, which would deadlock two of
// them. The claim then reads the row (sqlReadLocked) to learn which it
// was: the affected-rows count cannot tell under CLIENT_FOUND_ROWS.
const sqlClaimTx = `INSERT INTO idem_records ` + recordColumns + `
VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, 1, ` + now + ` + INTERVAL ? MICROSECOND, ` + now + `,
    ` + now + ` + INTERVAL ? MICROSECOND, ?)
ON DUPLICATE KEY UPDATE scope_hash = scope_hash`

// sqlRead reads a record as it stands, its expiry in microseconds since
// the Unix epoch: args offset, offset, scope.
const sqlRead = `SELECT fp_alg, fingerprint, state, token, expires_at <= ` + now + `,
    TIMESTAMPDIFF(MICROSECOND, ` + now + `, locked_until), response,
    TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', expires_at)
FROM idem_records WHERE scope_hash = ?`

// sqlReadLocked is sqlRead in the claim's transaction, which holds the
// row's lock already (sqlClaimTx): a locking read sees the latest
// committed row under REPEATABLE READ too, where a plain read would see
// the transaction's snapshot.
const sqlReadLocked = sqlRead + ` FOR UPDATE`

// sqlReclaim claims a record whose retention has passed and whose lease
// is not live, never an uncertain one (a record resolved not applied
// expired when it was resolved). Args: tenant, principal, route, key,
// fp_alg, fingerprint, token, offset and lease (NULL: Transactional),
// offset, offset and retention, request, scope, offset, offset.
const sqlReclaim = `UPDATE idem_records SET tenant = ?, principal = ?, route = ?, idem_key = ?,
    fp_alg = ?, fingerprint = ?, state = 'running', token = ?, attempt = 1, writes = writes + 1,
    locked_until = ` + now + ` + INTERVAL ? MICROSECOND, recovery_point = NULL, recovery_data = NULL,
    status = NULL, response = NULL, created_at = ` + now + `, expires_at = ` + now + ` + INTERVAL ? MICROSECOND,
    request = ?, reconcile_at = NULL, resolved_by = NULL, resolved_at = NULL, resolve_reason = NULL
WHERE scope_hash = ? AND expires_at <= ` + now + ` AND state <> 'uncertain'
    AND (state <> 'running' OR locked_until IS NULL OR locked_until <= ` + now + `)`

// sqlTakeover takes over an expired lease held by the token it read.
// Args: token, offset and lease (NULL: Transactional), offset and
// retention, scope, old token, offset, offset. The record then answers
// retries for a full retention from the takeover.
const sqlTakeover = `UPDATE idem_records SET token = ?, attempt = attempt + 1, writes = writes + 1,
    locked_until = ` + now + ` + INTERVAL ? MICROSECOND,
    expires_at = GREATEST(expires_at, ` + now + ` + INTERVAL ? MICROSECOND)
WHERE scope_hash = ? AND token = ? AND state = 'running'
    AND (locked_until IS NULL OR locked_until <= ` + now + `) AND expires_at > ` + now

// sqlRecovery reads what a takeover learned: arg scope.
const sqlRecovery = `SELECT attempt, recovery_point, recovery_data FROM idem_records WHERE scope_hash = ?`

// The fenced writes below end in "WHERE scope_hash = ? AND token = ?
// AND state = 'running'" (fenced): their own arguments come first. Each
// adds one to writes, so that a matched row always counts as affected.
const fenced = ` WHERE scope_hash = ? AND token = ? AND state = 'running'`

// sqlComplete stores the response: state, status, response.
const sqlComplete = `UPDATE idem_records SET state = ?, status = ?, response = ?, locked_until = NULL,
    writes = writes + 1` + fenced

// sqlCompleteTx is sqlComplete inside the claim's transaction, which it
// finds still open (@@in_transaction): a handler that ended it with COMMIT
// or ROLLBACK left the session in autocommit, and nothing is written.
// MariaDB only: MySQL has no @@in_transaction, and runs sqlComplete.
const sqlCompleteTx = sqlComplete + ` AND @@in_transaction = 1`

// sqlExtend: offset and lease, offset and lease plus margin.
const sqlExtend = `UPDATE idem_records SET locked_until = ` + now + ` + INTERVAL ? MICROSECOND,
    expires_at = GREATEST(expires_at, ` + now + ` + INTERVAL ? MICROSECOND), writes = writes + 1` + fenced

// sqlCheckpoint: point, data.
const sqlCheckpoint = `UPDATE idem_records SET recovery_point = ?, recovery_data = ?, writes = writes + 1` + fenced

// sqlEndLease ends the lease now: offset.
const sqlEndLease = `UPDATE idem_records SET locked_until = ` + now + `, writes = writes + 1` + fenced

// sqlPostpone ends the lease now and makes the operation due for a
// reconciler after a wait: offset, offset and wait.
const sqlPostpone = `UPDATE idem_records SET locked_until = ` + now + `,
    reconcile_at = ` + now + ` + INTERVAL ? MICROSECOND, writes = writes + 1` + fenced

// sqlRelease frees the key of a refused first attempt that recorded no
// recovery point.
const sqlRelease = `DELETE FROM idem_records` + fenced + ` AND attempt = 1 AND recovery_point IS NULL`

// sqlClearEnded deletes the running row of a Transactional claim that a
// handler committed itself (txAttempt.clearEnded).
const sqlClearEnded = `DELETE FROM idem_records` + fenced

// sqlFree deletes the record of an operation that a reconciler found did
// not happen.
const sqlFree = `DELETE FROM idem_records` + fenced

// sqlSweepPick picks at most a limit of expired records whose lease is not
// live and that are not uncertain, oldest first, skipping the rows a request holds: offset, offset,
// limit. It runs under READ COMMITTED, which takes no gap locks that would
// hold up the inserts of new keys.
const sqlSweepPick = `SELECT scope_hash FROM idem_records
WHERE expires_at <= ` + now + ` AND (locked_until IS NULL OR locked_until <= ` + now + `)
    AND state <> 'uncertain'
ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED`

// sqlStats counts the running records and the age of the oldest in
// microseconds: offset. A plain read: it waits for no lock.
const sqlStats = `SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), ` + now + `), 0)
FROM idem_records WHERE state = 'running'`
