// Package server is the server half of idem: net/http middleware that runs
// each keyed request (Idempotency-Key) exactly once per key and scope and
// answers every retry with the stored response, byte for byte, following
// the wire contract that the idem client SDK speaks.
//
// # Mounting
//
// Wrap each handler, so that the ServeMux has set r.Pattern when the
// middleware runs (the route is the method plus the pattern), and scope
// the keys by the caller ([Config.Scope]):
//
//	pool, _ := pgxpool.New(ctx, url)
//	_ = server.Migrate(ctx, pool)
//	store := server.NewPostgresStore(pool)
//	idem := server.Middleware(store, server.Config{Scope: tenantAndUser})
//	mux.Handle("POST /v1/payments", idem(createPayment))
//
//	// tenantAndUser gives the tenant and the user a request is made for.
//	// In real code, take them from the verified credentials.
//	func tenantAndUser(r *http.Request) (tenant, principal string) {
//		return r.Header.Get("X-Tenant"), r.Header.Get("X-User")
//	}
//
// ExampleTx is this, compiled, with its createPayment.
//
// A route that needs another policy ([KeyOptional]) or mode ([Leased]) gets a
// middleware of its own over the same store.
//
// # Transactional mode
//
// With a [PostgresStore] the middleware begins a transaction and claims the
// key in one round trip (after the first few requests on a connection,
// which prepare the store's statements there), and the handler makes its
// mutations in that transaction, [Tx](ctx). The middleware stores the
// response and commits in one more round trip, so mutation and stored
// result commit together. The claim is a transaction-level advisory lock
// on the key's scope (in the two-int4 key space, see PostgresStore) and
// the record is written once, as the transaction commits. The response is
// held until then: a handler's 201 never reaches the client when the
// commit failed (it gets commit-failed instead: 503 with Retry-After when
// the store was lost, as in a failover, else 500). A 2xx, 3xx or 4xx such
// as 402 commits and is stored; a 5xx or a panic rolls back
// (then the 5xx goes out, or the panic goes on); a rejection status (400,
// 404, 422, ... see [Config.RejectStatuses]) rolls back and stores nothing,
// so a corrected retry is processed. A duplicate that arrives while the
// first transaction is open waits for its lock, up to
// [Config.WaitBound]: it replays when the first commits, runs when the first
// rolls back, and gets 409 key-in-flight when the bound passes.
//
// # Leased mode
//
// For handlers whose effects leave the database, the claim commits on its
// own with a lease and a fencing token ([LeaseFrom]). The handler may extend
// the lease and should record a recovery point before each external effect.
// A duplicate that finds a live lease gets 409 with Retry-After set to the
// time left. A retry after the lease expired takes the operation over with
// a new token and learns from [Lease.Recovery] that an earlier attempt may
// have partly run, and how far it got. The completion of a stale attempt is
// refused, and its client gets 409 key-in-flight instead of a response that
// might contradict the new owner's. A 5xx or a panic ends the lease at once
// but keeps the record, so the next retry takes over immediately with the
// recovery point; a rejection status on a first attempt that recorded no
// recovery point releases the key.
//
// In Leased mode [Config.Retention] must be at least twice [Config.Lease]. A
// record whose lease is live is never treated as expired, a takeover makes
// the record answer for a full retention from then, and [Lease.Extend] keeps
// it at least one lease past the lease's new end: a retry after a lease
// ended always finds the record and its recovery point.
//
// # Reconciliation
//
// An operation whose attempt ended without an outcome (its node died or
// stalled past its lease, or it answered a 5xx) waits for its client's
// retry to take it over. [RunReconciler] settles such abandoned operations
// in the background instead: it takes each over as a retry would (a new
// fencing token and attempt number, so the stalled attempt's completion is
// refused), hands its stored request and recovery point to the route's
// [ReconcileFunc], which looks the effect up downstream, and stores the
// answer: [Completed] (the response every later retry replays), [NotHappened]
// (the record is deleted; a later retry runs afresh) or [NotKnown] (looked at
// again after a backoff, and left uncertain at [ReconcileConfig.MaxAge]:
// its retries get 409 outcome-uncertain until an operator resolves it,
// [Operator.Resolve]). Several nodes may run reconcilers over one
// database: each operation is taken by one of them at a time. A Leased
// claim stores its request for this (method, path and query, pattern, path
// values, Content-Type, Content-Language and [Config.FingerprintHeaders], and
// the body; never credentials or cookies).
//
// # Streaming and size
//
// A response larger than [Config.MaxResponseBytes], or one the handler
// flushes or hijacks, is committed at that moment as result-unavailable and
// streamed; a retry gets 500 result-unavailable and the handler never runs
// again. A 5xx or a rejection status that streams rolls back (or releases
// the key) at that moment instead, as it would unstreamed, and a retry runs
// afresh. Flushing therefore ends a Transactional handler's transaction:
// do every mutation before the first Flush.
//
// # Retention
//
// A record answers retries for Config.Retention (24 h by default); a retry
// after that runs the handler again, even before the record is swept.
// [RunSweeper] (or [Store.Sweep]) deletes expired records in bounded batches.
//
// # Replicated databases
//
// The promises hold across a failover only when the new primary has every
// commit that was answered: synchronous replication, and a failover that
// fences the old primary. [CheckDurability] reports the settings that decide
// it; log it at start. docs/replication.md says what each setting keeps
// and what asynchronous replication loses (answered operations, never a
// double in Transactional mode).
package server
