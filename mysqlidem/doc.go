// Package mysqlidem keeps the idempotency records of package server on
// MySQL 8 or MariaDB 10.6+ (InnoDB), through database/sql and
// github.com/go-sql-driver/mysql, in a module of its own so that
// Postgres-only services download no MySQL driver.
//
//	db, _ := sql.Open("mysql", "app@tcp(db:3306)/shop?interpolateParams=true")
//	_ = mysqlidem.Migrate(ctx, db)
//	store := mysqlidem.New(db)
//	mux.Handle("POST /payments", server.Middleware(store, server.Config{})(pay))
//
// A [server.Transactional] handler makes its writes in the claim's
// transaction, which [server.SQLTx] hands it as a *sql.Tx (directly or
// under GORM, sqlx or bun: docs/orm's recipes, which its tests run on
// MariaDB too): the
// writes and the stored response commit together, or roll back together
// (a 5xx, a rejection status, a panic). A [server.Leased] claim commits
// before the handler runs, under a lease and a fencing token, with
// recovery points, takeover, [server.RunReconciler] and [server.RunSweeper].
// An operation the reconciler cannot tell by its MaxAge stays uncertain
// (never swept, reclaimed or taken again; its retries get 409
// outcome-uncertain) until an operator resolves it through
// [server.Operator.Resolve]: the Store is a [server.Resolver], and
// [Migrate] adds the resolution's columns to a table of an older version.
//
// # The claim's lock
//
// A Transactional claim begins a transaction and runs INSERT ... ON
// DUPLICATE KEY UPDATE scope_hash = scope_hash on the key's row (primary
// key scope_hash): a new key inserts its running row, an existing one is
// left as it is; either way the transaction then holds the row's exclusive
// record lock to its end. A duplicate's statement waits for that lock,
// that is for the first request's commit or rollback, then reads the row
// as committed (a locking read, which under REPEATABLE READ too sees the
// latest version) and replays, or claims what a rollback released. Why
// this lock, of the three:
//
//   - The unique insert (this one) ties the exclusion to the transaction
//     itself: it ends exactly when the commit or rollback does, and needs
//     no statement of its own. It costs the claim's statement, one locking
//     read to learn which way it went (the affected-rows count cannot tell
//     under CLIENT_FOUND_ROWS), and a running row written in the
//     transaction (undo and redo that a commit turns into the record). ON
//     DUPLICATE KEY UPDATE takes the exclusive lock at once, where a plain
//     INSERT's duplicate check takes a shared lock that two waiters would
//     each try to upgrade, and deadlock.
//   - GET_LOCK is a session lock, not a transaction's: it must be released
//     by a statement after the commit, outlives a rollback the store did
//     not see, is local to one server (Galera, Group Replication and Vitess
//     do not share it), and costs two statements.
//   - A locking read (SELECT ... FOR UPDATE) of a missing row locks a gap
//     under REPEATABLE READ, which holds up the inserts of other keys that
//     fall in it and deadlocks two claims of one new key; under READ
//     COMMITTED it locks nothing, and two claims of a new key both proceed.
//
// The claim's statements behave alike under READ COMMITTED and REPEATABLE
// READ (InnoDB's default): the duplicate-key check and the locking read
// take record locks on the key's own row, and no gap lock, at either level
// (the row exists, or is being inserted). The store does not change the
// transaction's isolation level: the handler gets the database's.
// Deadlocks between duplicates arise only when a first request that
// inserted a new key rolls back while two or more wait: InnoDB turns
// their waits into gap locks and their inserts then conflict (1213). The
// claim begins again after a deadlock while its wait bound lasts, and
// answers 409 key-in-flight with Retry-After past it, never an error.
//
// The wait is bounded by innodb_lock_wait_timeout, which InnoDB counts in
// whole seconds: the wait bound is rounded up to seconds. On MariaDB it is
// the statement's own (SET STATEMENT ... FOR); on MySQL the store sets the
// session's before the statement and puts it back after, two statements
// more. The sweeper and the reconciler run under READ COMMITTED with SKIP
// LOCKED: they skip the rows requests hold and lock no gap.
//
// # What the store does not see
//
// A handler must not end the transaction. Its Commit or Rollback of the
// *sql.Tx is caught (database/sql then answers sql.ErrTxDone), and so is a
// COMMIT or ROLLBACK sent as SQL, which leaves the session outside a
// transaction: the record's write requires @@in_transaction and writes
// nothing then, and the claim's running row, which a COMMIT made durable,
// is deleted after the rollback. The request gets 500 commit-failed and
// nothing is stored; what the handler committed stays committed. That
// needs MariaDB's @@in_transaction, which MySQL lacks: on MySQL a COMMIT
// or ROLLBACK sent as SQL is not caught, and the record is written in
// autocommit after it.
// A handler that sends COMMIT and then BEGIN is not caught: its writes
// before the COMMIT commit with the running row, which a duplicate may
// take over and run again, and the record commits with the writes after
// the BEGIN.
//
// # Operators
//
// Store is a [server.RecordStore]: server.NewOperator(store, ...) looks
// records up, lists the operations in flight and evicts, and package
// admin serves its page on that Operator, a Leased record's stored request
// included; idemctl reads them with -mysql DSN.
//
// # What was tested
//
// The tests ran on MariaDB 10.11 only (storetest in both modes under
// REPEATABLE READ and READ COMMITTED, the end-to-end suite): MySQL 8's
// paths (the session's lock wait set and put back, NOWAIT evictions, no
// @@in_transaction) are written from its documentation and untested.
//
// # Durability
//
// [CheckDurability] reports the settings that decide whether an answered
// request's record survives a crash or a failover.
package mysqlidem
