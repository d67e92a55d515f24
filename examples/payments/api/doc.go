// Package api is the payments API of the idem example: a small service that
// moves money, built on package server, which the demo (go run
// ./examples/payments), the server program (go run
// ./examples/payments/server) and the end-to-end tests all mount.
//
// # Routes
//
//	PUT  /v1/accounts/{id}  {"balance_cents": 10000, "currency"?: "EUR"}
//	GET  /v1/accounts/{id}  -> {"id", "currency", "balance_cents", "payment_count"}
//	POST /v1/payments       {"account_id", "amount_cents", "currency", "reference"?}
//	POST /v1/charges        {"account_id", "amount_cents", "currency"}
//
// PUT /v1/accounts/{id} creates the account (in EUR when "currency" is
// absent) or sets its balance. An account's currency never changes: a PUT
// without "currency" keeps it, and a PUT with another currency is refused
// with 409 currency-conflict and changes nothing.
//
// POST /v1/payments debits an account: 201 {"payment_id", "account_id",
// "amount_cents", "currency", "balance_cents"}, or 402 insufficient-funds,
// which is the operation's outcome and is stored and replayed like a 201.
// Malformed JSON, an unknown account or currency, or an amount <= 0 is
// refused with 400 and stores nothing, so a corrected retry with the same
// key is processed. It runs in the middleware's Transactional mode: with
// PostgresBackend the debit, the payment row and the stored response
// commit in one transaction.
//
// POST /v1/charges charges a card at a gateway (see Gateway) and credits
// the account. Its effect leaves the database, so it runs in Leased mode and
// records recovery points: a retry that takes over after a crash asks the
// gateway again with the same downstream key instead of charging twice.
// When no retry comes, a reconciler (server.RunReconciler with
// ReconcileRoutes) settles the abandoned charge: it looks the key up at the
// gateway, records a charge made, and stores the 201 for later retries to
// replay.
//
// Errors are RFC 9457 problem documents (application/problem+json).
//
// # Authentication
//
// Every /v1 route requires "Authorization: Bearer <tenant>:<principal>".
// This is a demo scheme, not security: it shows where a real service's
// authentication plugs in. Accounts belong to the tenant; idempotency keys
// are scoped by tenant and principal, as the wire contract requires.
//
// # Backends
//
// MemoryBackend (with a server.MemoryStore) needs nothing and forgets
// everything when the process ends. PostgresBackend (with a
// server.PostgresStore on the same pool, after Migrate; New makes one when
// Config.Store is nil) survives crashes: a restarted server answers the
// retries of finished operations with replays. MySQLBackend (with a
// mysqlidem.Store on the same *sql.DB, after MigrateMySQL and
// mysqlidem.Migrate) does the same on MySQL or MariaDB: its writes run on
// the *sql.Tx that server.SQLTx hands the handler. The Receiver and the
// outbox run on Postgres only.
package api
