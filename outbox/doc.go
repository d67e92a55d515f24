// Package outbox delivers the effects of an operation that leave the
// database: HTTP requests to other services (a ledger, a notifier, a
// webhook), stored in the operation's own Postgres transaction and sent
// after it commits, with retries, under one Idempotency-Key.
//
// An Outbox has three main methods. Enqueue stores a Message in the
// caller's transaction (under server.Middleware, the one server.Tx gives
// the handler): it is sent if and only if that transaction commits. Run is
// the dispatcher, a long-running worker started beside the HTTP server (or
// in processes of its own) that delivers committed messages until its
// context ends. Parked and Redrive show and resend the messages it gave up
// on. Migrate creates its tables. Memory is the same outbox in process
// memory, for tests and demos.
//
// # What it guarantees
//
//   - A message enqueued in a transaction that rolls back is never sent; one
//     in a transaction that commits is delivered, or parked where an
//     operator sees it.
//   - Every delivery of a message carries the same Idempotency-Key, fixed at
//     enqueue (see Message.Key and DeriveKey). A downstream that
//     deduplicates by key (server.Middleware does) therefore applies each
//     message once, whatever the retries, dispatcher crashes and re-drives.
//     The delivery itself is at least once: the outbox cannot know whether a
//     request that got no answer took effect, so it sends it again.
//   - A message is delivered by at most one dispatcher at a time, however
//     many run against the database; one whose dispatcher died is delivered
//     again after a bounded time (see Config.RescueAfter).
//
// What it does not guarantee: order (messages are delivered concurrently,
// and a retried one overtakes nothing and is overtaken by others: a
// downstream that needs order must order by data it carries, such as a
// version or a timestamp); exactly-once effects at a downstream that ignores
// Idempotency-Key (it gets every delivery as a new request); and
// deduplication beyond the downstream's key retention (keep Config.MaxAge
// under it).
//
// # Delivery
//
// A dispatcher sends each message through the idem client
// (idem.NewTransport with Config.Client): classification, full-jitter
// backoff, the retry budget and the circuit breaker apply within each
// delivery, bounded by Config.Timeout. The request has the message's
// method, URL, headers and body, and its key in the header Idempotency-Key
// (or the one Config.Client.KeyHeader names; a message may not set that
// header itself, nor the transport's own headers, see Message.Header). The
// outcome:
//
//   - 2xx: delivered. So is a 500 result-unavailable from an idem server
//     (it ran the operation but cannot replay its response).
//   - A definite refusal, a 4xx other than 408, 409 key-in-flight, 425 and
//     429 (or a 1xx or 3xx, which the outbox does not follow): parked at
//     once, with the response's status, a few KiB of its headers and the
//     first 4 KiB of its body (see ParkedMessage).
//   - Not sent, ambiguous (timeout, reset, body cut short), 408, 409
//     key-in-flight, 425, 429, 5xx: delivered again after a backoff
//     (Config.MinBackoff, MaxBackoff, at least the Retry-After), across
//     dispatcher restarts, with the same key, until Config.MaxAttempts
//     deliveries or Config.MaxAge; then parked with the last response or
//     error. A delivery that sent nothing because the client's own breaker
//     was open is deferred and not counted.
//
// Parked messages are kept until re-driven: Redrive sends one again, same
// key, with a fresh retry window.
//
// # Keys
//
// An empty Message.Key is derived at enqueue. Under server.Middleware,
// from the operation (tenant, principal, route, Idempotency-Key) and the
// message's Name, with DeriveKey's documented, versioned hash: an
// operation that runs again (a rollback then a retry, or a Leased
// takeover) enqueues the same message under the same key, and Enqueue,
// idempotent by key, stores it once. Two different messages under one key
// (two messages of one operation with the same Name) are refused with
// ErrKeyConflict rather than sent as one. Outside an operation, the key is
// a random UUIDv4 fixed at enqueue.
//
// # The queue
//
// The Postgres outbox is a River queue (github.com/riverqueue/river, with
// its pgx v5 driver): transactional insert, fetching with FOR UPDATE SKIP
// LOCKED, LISTEN/NOTIFY so that a committed message is picked up within
// milliseconds (polling every Config.PollInterval is the fallback), rescue
// of messages whose dispatcher died, leader election and cleanup are
// River's. Messages are jobs of kind "idem_outbox_message" in the queue
// "idem_outbox"; a delivered message is deleted 24 h after its delivery,
// a parked one is kept until re-driven. The outbox's own part is the
// message, its key, the delivery through the idem client, the parking
// rules and the Observer hooks. River's types do not appear in this API.
package outbox
