// Package outbox delivers the effects of an operation that leave the
// database: HTTP requests to other services (a ledger, a notifier, a
// webhook), stored in the operation's own Postgres transaction and sent
// after it commits, with retries, under one Idempotency-Key.
//
// An Outbox has three main methods. Enqueue stores a Message in the
// caller's transaction (under server.Middleware, the one server.Tx gives
// the handler): it is sent if and only if that transaction commits. Run is
// the dispatcher, a long-running worker started beside the HTTP server (or
// in processes of its own) that relays committed messages into its queue
// and delivers them until its context ends. Parked and Redrive show and
// resend the messages it gave up on. Migrate creates its tables. Memory is
// the same outbox in process memory, for tests and demos.
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
// delivery, bounded by Config.Timeout. Its calls fail fast
// (idem.WithFailFast): a delivery that the breaker or the budget refuses
// ends at once, rather than hold a worker while the host is down. The
// request has the message's method, URL, headers and body, and its key in
// the header Idempotency-Key (or the one Config.Client.KeyHeader names; a
// message may not set that header itself, nor the transport's own
// headers, see Message.Header). The outcome:
//
//   - 2xx: delivered. So is a 500 result-unavailable from an idem server
//     (it ran the operation but cannot replay its response).
//   - A definite refusal, a 4xx other than 408, 409 key-in-flight, 425 and
//     429 (or a 1xx or 3xx, which the outbox does not follow): parked at
//     once, with the response's status, a few KiB of its headers and the
//     first 4 KiB of its body (see ParkedMessage).
//   - Not sent, refused by the client (breaker open, no budget),
//     ambiguous (timeout, reset, body cut short), 408, 409 key-in-flight,
//     425, 429, 5xx: delivered again after a backoff (Config.MinBackoff,
//     MaxBackoff, at least the Retry-After), across dispatcher restarts,
//     with the same key, until Config.MaxAttempts deliveries, Config.MaxAge
//     or the downstream's key retention (Config.KeyRetention); then parked
//     with the last response or error.
//
// Parked messages are kept until re-driven: Redrive sends one again, same
// key, with a fresh retry window, unless a delivery of it may have taken
// effect longer ago than Config.KeyRetention: the downstream may then have
// forgotten the key and would run the operation again, so Redrive refuses
// with ErrPastRetention (ParkedMessage.RedriveBy says until when it may),
// and RedrivePastRetention is the caller's explicit choice to send it
// anyway.
//
// # Sharing the workers
//
// All destinations share a dispatcher's Config.Workers and its one River
// queue, so the outbox keeps a slow one from taking them all (a
// destination is the scheme, host and port of Message.URL; the bounds are
// per dispatcher):
//
//   - A fast destination, whose deliveries end within 100 ms on average
//     and none of whose deliveries in flight has run longer, may use every
//     worker: a single healthy downstream gets the dispatcher's whole
//     throughput.
//   - A slow one (a host that hangs, or fails after the client's retries),
//     or one not known yet, may have at most (Workers - Workers/4) / n
//     deliveries in flight, at least 1, n being the number of such
//     destinations with deliveries in flight: a quarter of the workers
//     always stays for the others, and slow destinations split the rest.
//     A message to a destination not known yet, over that bound, waits up
//     to 100 ms for the destination's first deliveries to tell.
//   - A message over its destination's bound is put off, not delivered
//     and not counted: it is due again at its place in the destination's
//     schedule, spaced by the destination's delivery time over its bound
//     (so put-off messages come back about as fast as it takes them), at
//     most Config.MaxBackoff later. Each put-off costs River two row
//     updates (the fetch and the snooze).
//   - The Postgres dispatcher fetches up to four times Workers messages at
//     once, and delivers Workers of them at once, so that it passes the
//     messages it puts off quickly; a fetched message waits for a worker
//     up to half of RescueAfter - Timeout - 2 s, at most 5 s, and is put
//     off after (with RescueAfter at its minimum, Timeout + 2 s, it
//     fetches only Workers).
//
// Workers is the knob: more workers give every destination more, and the
// quarter kept for the others grows with them. The order of a FIFO queue
// still applies: messages enqueued behind a long backlog wait for the
// dispatcher to pass it (BENCHMARKS.md §12 has the figures, and River's
// own bound).
//
// # A destination that is down
//
// A delivery that the client refused to send, its host's breaker open or
// no budget for a retry, is a failed delivery: it counts toward
// MaxAttempts and waits the backoff of its attempt, as one that was sent.
// Two things keep a dead destination's backlog cheap:
//
//   - Its wakes are paced: a dispatcher makes at most 15 refused messages
//     due again per second, each in the first second at or after its
//     backoff with room, so they cost River at most 45 row updates a
//     second (three each), however many are waiting; the price is that a
//     backlog of B refused messages takes B/15 seconds to go round once. When a wake comes later than the
//     backoff, the message counts the time instead: a refused delivery
//     parks it (ReasonAttempts) once its retry window is as old as
//     MaxAttempts failed deliveries can make it (the sum of their longest
//     backoffs, MinBackoff doubling up to MaxBackoff: about 83 minutes
//     with the defaults).
//   - When a delivery to the destination succeeds again, the messages the
//     dispatcher holds for it are made due at once, rather than at their
//     paced time.
//
// # Telemetry of many destinations
//
// The idem client's metrics (otelidem's Client, as Config.Client's
// Observer) carry server.address and server.port, so a dispatcher that
// sends to 100 webhook hosts makes 100 series per client instrument
// ("idem.client.*"). The outbox's own metrics (otelidem's Outbox) do not
// name the destination. Where the hosts are many, drop the two attributes
// with an OpenTelemetry SDK view on the client instruments:
//
//	sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "idem.client.*"},
//		sdkmetric.Stream{AttributeFilter: attribute.NewDenyKeysFilter("server.address", "server.port")}))
//
// as a MeterProvider option (otelidem's TestOutboxClientMetricsWithoutTheHost
// checks it: 100 hosts, one series); the breaker's state per host then
// shows in its logs (Config.Client.Logger) rather than in metrics.
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
// ErrKeyConflict rather than sent as one; a different message under a key
// whose first message was already relayed (see "The queue") is parked
// unsent with ReasonKeyConflict instead. Outside an operation, the key is
// a random UUIDv4 fixed at enqueue.
//
// # The queue
//
// The Postgres outbox is a River queue (github.com/riverqueue/river, with
// its pgx v5 driver) behind a narrow table. Enqueue writes one row of
// idem_outbox_enqueued in the caller's transaction (the message as JSON
// under its key, the table's primary key and only index), in one round
// trip: River's job row, with its seven indexes, costs the request's
// throughput several times what this row does (BENCHMARKS.md §8). Every
// dispatcher's Run also relays: in a transaction of its own it moves
// committed rows into River's queue, up to 1,000 at once (River's
// InsertManyTx, and the rows' delete), so that a relay that dies leaves
// its rows to the next one, and River's unique key on the message's key
// keeps one job per key. An enqueue wakes
// the relays through LISTEN/NOTIFY (at most one notification per 50 ms of
// an Outbox: a notification makes its transaction's commit take a lock of
// the database's), and a woken relay looks again every 5 ms while
// messages come, so a committed message is relayed within milliseconds;
// polling every Config.PollInterval is the fallback. A message relayed and
// then enqueued again under its key, in a transaction that committed after
// the move, is settled by the relay: folded into the first when it is the
// same, parked with ReasonKeyConflict when it is not. Lookup reports a
// message not yet relayed as StateEnqueued, and Stats counts it pending.
//
// Fetching with FOR UPDATE SKIP LOCKED, LISTEN/NOTIFY so that a relayed
// message is picked up within milliseconds (polling every
// Config.PollInterval is the fallback), rescue of messages whose
// dispatcher died, leader election and cleanup are River's. Messages are
// jobs of kind "idem_outbox_message" in the queue "idem_outbox"; a
// delivered message is deleted 24 h after its delivery, a parked one is
// kept until re-driven. A message's ID is drawn from River's job ID
// sequence at enqueue and kept in its job's arguments (River gives the job
// an ID of its own; River UI shows both). The outbox's own part is the
// narrow table and its relay, the message, its key, the delivery through
// the idem client, the parking rules and the Observer hooks. River's types
// do not appear in this API.
package outbox
