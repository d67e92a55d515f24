// Package outbox delivers the effects of an operation that leave the
// database: HTTP requests to other services (a ledger, a notifier, a
// webhook), stored in the operation's own Postgres transaction and sent
// after it commits, with retries, under one Idempotency-Key.
//
// An [Outbox] has three main methods. [Outbox.Enqueue] stores a [Message]
// in the caller's transaction (under [server.Middleware], the one
// [server.Tx] gives the handler): it is sent if and only if that
// transaction commits. [Outbox.Run] is the dispatcher, a long-running
// worker started beside the HTTP server (or in processes of its own) that
// relays committed messages into its queue and delivers them until its
// context ends. [Outbox.Parked] and [Outbox.Redrive] show and resend the
// messages it gave up on. [Migrate] creates its tables. [Memory] is the
// same outbox in process memory, for tests and demos.
//
// # What it guarantees
//
//   - A message enqueued in a transaction that rolls back is never sent; one
//     in a transaction that commits is delivered, or parked where an
//     operator sees it.
//   - Every delivery of a message carries the same Idempotency-Key, fixed at
//     enqueue (see [Message.Key] and [DeriveKey]). A downstream that
//     deduplicates by key (server.Middleware does) therefore applies each
//     message once, whatever the retries, dispatcher crashes and re-drives.
//     The delivery itself is at least once: the outbox cannot know whether a
//     request that got no answer took effect, so it sends it again.
//   - A message is delivered by at most one dispatcher at a time, however
//     many run against the database; one whose dispatcher died is delivered
//     again after a bounded time (see [Config.RescueAfter]).
//
// What it does not guarantee: order (messages are delivered concurrently,
// and a retried one overtakes nothing and is overtaken by others: a
// downstream that needs order must order by data it carries, such as a
// version or a timestamp); exactly-once effects at a downstream that ignores
// Idempotency-Key (it gets every delivery as a new request); and
// deduplication beyond the downstream's key retention (keep [Config.MaxAge]
// under it).
//
// # Delivery
//
// A dispatcher sends each message through the idem client
// ([idem.NewTransport] with [Config.Client]): classification, full-jitter
// backoff, the retry budget and the circuit breaker apply within each
// delivery, bounded by [Config.Timeout]. Its calls fail fast
// ([idem.WithFailFast]): a delivery that the breaker or the budget refuses
// returns at once, and the outbox decides how long it holds the worker
// (see "A destination that is down"). The
// request has the message's method, URL, headers and body, and its key in
// the header Idempotency-Key (or the one Config.Client's
// [idem.Config.KeyHeader] names; a message may not set that header itself,
// nor the transport's own headers, see [Message.Header]). The outcome:
//
//   - 2xx: delivered. So is a 500 result-unavailable from an idem server
//     (it ran the operation but cannot replay its response).
//   - A definite refusal, a 4xx other than 408, 409 key-in-flight, 425 and
//     429 (or a 1xx or 3xx, which the outbox does not follow): parked at
//     once, with the response's status, a few KiB of its headers and the
//     first 4 KiB of its body (see [ParkedMessage]).
//   - Not sent, refused by the client (breaker open, no budget),
//     ambiguous (timeout, reset, body cut short), 408, 409 key-in-flight,
//     425, 429, 5xx: delivered again after a backoff ([Config.MinBackoff],
//     [Config.MaxBackoff], at least the Retry-After), across dispatcher
//     restarts, with the same key, until [Config.MaxAttempts] deliveries,
//     Config.MaxAge or the downstream's key retention
//     ([Config.KeyRetention]); then parked with the last response or error.
//
// Parked messages are kept until re-driven: Redrive sends one again, same
// key, with a fresh retry window, unless a delivery of it may have taken
// effect longer ago than Config.KeyRetention: the downstream may then have
// forgotten the key and would run the operation again, so Redrive refuses
// with [ErrPastRetention] ([ParkedMessage.RedriveBy] says until when it
// may), and [Outbox.RedrivePastRetention] is the caller's explicit choice
// to send it anyway.
//
// # Sharing the workers
//
// A destination is the scheme, host and port of [Message.URL]. The
// Postgres outbox spreads destinations over [Config.Queues] River queues
// (16) by a hash of each, and each queue has its own River producer and its
// own [Config.Workers] in every dispatcher: a queue fetches at most Workers of
// its messages at once, and delivers them. A destination that hangs, or
// fails, or is down therefore holds up only the destinations of its own
// queue; the others are fetched and delivered as if it were not there.
// The knobs: Workers is per queue, so a dispatcher delivers up to
// Workers x (Queues + 1) messages at once in all (the one more is the
// queue of earlier versions, see "The queue"), and a single destination
// gets at most Workers of them; Queues sets how likely two destinations
// are to share a queue (with k destinations, a given one shares its queue
// with another with probability 1 - (1 - 1/Queues)^(k-1): 6% for 2
// destinations over 16 queues, 46% for 11), at the cost of a River
// producer each (an idle one polls every [Config.PollInterval]). Memory has
// one queue, shared by all its destinations.
//
// Within a queue, destinations share its workers (a destination that is
// alone in its queue is bound by Workers only):
//
//   - A fast destination, whose deliveries end within 100 ms on average
//     and none of whose deliveries in flight has run longer, may use every
//     worker of its queue.
//   - A slow one (a host that hangs, or fails after the client's retries),
//     or one not known yet, may have at most (Workers - Workers/4) / n
//     deliveries in flight, at least 1, n being the number of such
//     destinations of the queue with deliveries in flight: a quarter of
//     the workers always stays for the others, and slow destinations
//     split the rest. A message to a destination not known yet, over that
//     bound, waits up to 100 ms for the destination's first deliveries to
//     tell.
//   - A message over its destination's bound is put off, not delivered
//     and not counted: it is due again at its place in the destination's
//     schedule, spaced by the destination's delivery time over its bound
//     (so put-off messages come back about as fast as it takes them), at
//     most Config.MaxBackoff later. Each put-off costs River two row
//     updates (the fetch and the snooze), and a queue passes the messages
//     it puts off one worker at a time: behind a slow destination's
//     backlog in the same queue, the others wait for that backlog to be
//     put off (BENCHMARKS.md §12).
//   - A destination whose deliveries its client refuses (breaker open) may
//     take every worker of its queue while no other destination of the
//     queue had a delivery in flight in the last minute (see "A
//     destination that is down"); otherwise it leaves a quarter too.
//
// A queue is FIFO: when two destinations share one, the order of their
// messages in it still applies, and the bounds above are what keeps one
// from taking the other's workers.
//
// # A destination that is down
//
// A delivery that the client refused to send, its host's breaker open, is
// a failed delivery: it counts toward MaxAttempts and waits the backoff
// of its attempt, as one that was sent. What keeps a dead destination's
// backlog cheap is that its messages are not fetched faster than they can
// be refused at a bounded pace:
//
//   - A turn whose delivery was refused holds its worker until its place
//     in the dispatcher's pace: at most 15 such turns end per second, in
//     all the queues of a dispatcher. Meanwhile it asks the client again
//     every 250 ms, sending nothing while the breaker is open: when the
//     open period ends, one of these is the probe that the breaker lets
//     through, and when a delivery to the destination succeeds, every turn
//     held for it delivers at once. A turn holds at most Timeout plus half
//     of RescueAfter - Timeout - 2 s (at most 5 s more).
//   - Since a queue fetches no more messages than it has workers, a dead
//     destination alone in its queue has its messages fetched at that
//     pace, and each costs River at most three row updates a turn (the
//     fetch, the turn's end, and River's scheduler making the message
//     available after a backoff over 5 s): about 45 a second for one dead
//     destination, however many messages wait, and no more for several,
//     while their held turns can wait for their places (a queue's Workers
//     turns, 15 a second in all, each holding at most as long as said
//     above). A dead destination that shares its queue with a live one
//     leaves it a quarter of the workers, and its messages fetched into
//     that quarter are put off, two row updates each, as fast as the
//     queue passes them.
//   - A refused delivery parks the message ([ReasonAttempts]) once its
//     retry window, from its enqueue or last re-drive, is as old as
//     MaxAttempts failed deliveries can make it (the sum of their longest
//     backoffs, MinBackoff doubling up to MaxBackoff: about 83 minutes
//     with the defaults), its wait in the queue behind the destination's
//     other messages included. The pace bounds parking too: a parked
//     message is one turn, two row updates, so a backlog of B messages to
//     a destination that stays dead is parked about B/15 seconds after
//     that time at the soonest, not at it (BENCHMARKS.md §12).
//   - When a delivery to the destination succeeds again, the messages
//     waiting in the queue after a refused turn are made due at once,
//     rather than after their backoff.
//
// # Telemetry of many destinations
//
// The idem client's metrics (otelidem's Client, as the [idem.Config.Observer]
// of Config.Client) carry server.address and server.port, so a dispatcher that
// sends to 100 webhook hosts makes 100 series per client instrument
// ("idem.client.*"). The outbox's own metrics (otelidem's Outbox) do not name
// the destination. Where the hosts are many, drop the two attributes with an
// OpenTelemetry SDK view on the client instruments:
//
//	sdkmetric.WithView(sdkmetric.NewView(sdkmetric.Instrument{Name: "idem.client.*"},
//		sdkmetric.Stream{AttributeFilter: attribute.NewDenyKeysFilter("server.address", "server.port")}))
//
// as a MeterProvider option (otelidem's TestOutboxClientMetricsWithoutTheHost
// checks it: 100 hosts, one series); the breaker's state per host then
// shows in its logs ([idem.Config.Logger]) rather than in metrics.
//
// # Keys
//
// An empty Message.Key is derived at enqueue. Under server.Middleware, from
// the operation (tenant, principal, route, Idempotency-Key) and the message's
// Name, with DeriveKey's documented, versioned hash: an operation that runs
// again (a rollback then a retry, or a [server.Leased] takeover) enqueues the
// same message under the same key, and Enqueue, idempotent by key, stores it
// once. Two different messages under one key (two messages of one operation
// with the same Name) are refused with [ErrKeyConflict] rather than sent as
// one; a different message under a key whose first message was already relayed
// (see "The queue") is parked unsent with [ReasonKeyConflict] instead. Outside
// an operation, the key is a random UUIDv4 fixed at enqueue.
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
// committed rows into River's queue, up to 1,000 at once (the rows'
// delete, and River's InsertManyTx), so that a relay that dies leaves
// its rows to the next one, and River's unique key on the message's key
// keeps one job per key. The relay's transaction commits asynchronously
// (synchronous_commit off for it alone): losing it in a crash or a
// failover leaves its rows to be relayed again, and River's fetch of a
// job, a synchronous commit, makes the move durable before a delivery.
// An enqueue wakes the relays through LISTEN/NOTIFY (at most one
// notification per 50 ms of an Outbox: a notification makes its
// transaction's commit take a lock of the database's), and a woken relay
// looks again while messages come (Config.FetchCooldown after each batch
// it moved, River's pace, or 5 ms after finding none), so a committed
// message is relayed within milliseconds; polling every
// Config.PollInterval is the fallback. A message relayed and
// then enqueued again under its key, in a transaction that committed after
// the move, is settled by the relay: folded into the first when it is the
// same, parked with ReasonKeyConflict when it is not. [Outbox.Lookup]
// reports a message not yet relayed as [StateEnqueued], and [Outbox.Stats]
// counts it pending.
//
// [Migrate] bounds the pending lists of River's GIN indexes at 128 kB: at
// the default 4 MB, the statement that emptied one held every message
// behind it for up to 140 ms.
//
// Fetching with FOR UPDATE SKIP LOCKED, LISTEN/NOTIFY so that a relayed
// message is picked up within milliseconds (polling every
// Config.PollInterval is the fallback), rescue of messages whose
// dispatcher died, leader election and cleanup are River's. Messages are
// jobs of kind "idem_outbox_message" in the queues "idem_outbox_00" to
// "idem_outbox_15" (Config.Queues, see "Sharing the workers"): the relay
// puts each in the queue of its destination. Versions before Config.Queues
// had one queue, "idem_outbox": every dispatcher still fetches from it, so
// that the messages an earlier version left there are delivered, parked
// and re-driven as before (Migrate upgrades in place). A delivered message
// is deleted 24 h after its delivery, a parked one is kept until
// re-driven. A message's ID is drawn from River's job ID
// sequence at enqueue and kept in its job's arguments (River gives the job
// an ID of its own; River UI shows both). The outbox's own part is the
// narrow table and its relay, the message, its key, the delivery through
// the idem client, the parking rules and the [Observer] hooks. River's types
// do not appear in this API.
package outbox
