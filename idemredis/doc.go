// Package idemredis keeps idem's idempotency records in Redis (or Valkey),
// for Leased routes: operations whose effect leaves the database (a call
// to a card network, Stripe, a bank), whose teams often keep their locks
// in Redis already. It is a module of its own
// (github.com/idemkit/idem/idemredis), so that users of idem who do not
// want go-redis do not get it.
//
//	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
//	store, err := idemredis.New(ctx, rdb, idemredis.Config{})
//	charges := server.Middleware(store, server.Config{Mode: server.Leased})
//	mux.Handle("POST /v1/charges", charges(chargeHandler))
//	go server.RunReconciler(ctx, store, server.ReconcileConfig{Routes: ...})
//
// [Store] is a [server.Store] and passes its conformance suite
// (server/storetest) on one node and on a three-master Redis Cluster. It
// takes go-redis v9's UniversalClient: one node, Sentinel (a failover
// client) or Cluster. It needs Redis 7.0 or later (or Valkey): its scripts
// declare flags in a shebang (`#!lua flags=...`), so that a Redis at
// maxmemory refuses a claim before its handler runs (see Durability).
//
// # What it promises
//
// Leased mode only: a Transactional route on a Redis store is refused
// when the middleware is built ([server.Middleware] panics with
// [ErrTransactional]), because Redis cannot join the handler's database
// transaction. Every transition of a record (claim, takeover, extension,
// recovery point, completion, abort, a reconciler's take and its
// settlement) is one Lua script, judged by Redis's own clock (TIME, one
// clock for every node of the service), under a fencing token per
// attempt: a stale token changes nothing, and its write returns
// [server.ErrLeaseLost] (docs/CONTRACT.md §5, §10).
//
// # Keys
//
// A scope's keys share one hash tag, so that each script touches one
// cluster slot: the tag of its bucket, one of 16 per [Config.Prefix],
// drawn from the scope's hash. (A tag of each scope's own would keep a
// record in one slot too, but then a route's index of abandoned leases
// could not be written by the record's script, and the two could disagree
// after a failure.) A store's records thus live in 16 cluster slots, on
// at most 16 masters, spread as the cluster assigns those slots. A bucket
// holds its records (hashes), one due index per route (a sorted set of
// the running records by the time their lease ends or their reconciler's
// wait passes), which the reconciler reads instead of scanning the
// keyspace, and one running index (by first claim) for Stats. Retention
// is key expiry: a record expires at the later of its retention and its
// lease's end, so Redis never deletes a record that still answers, and
// Sweep deletes none (it clears the indexes of records left running past
// their retention).
//
// # Durability
//
// Redis replicates asynchronously: a failover to a replica that had not
// received a write loses it. Without [Config.Replicas], a lost claim lets
// the retry run the operation again beside the attempt that already
// acted, and a lost completion of an operation already answered lets a
// late duplicate be answered afresh. With it, every claim, takeover,
// recovery point and extension waits (WAIT) for that many replicas before
// the handler runs or goes on, and every completion and replay before its
// response leaves; one they do not acknowledge is answered 503 with
// Retry-After, never released, so a failover to a replica that
// acknowledged loses no answered operation (Config.Replicas says what is
// still lost). BENCHMARKS.md's Redis failover section counts, with and
// without it and beside Postgres, the operations run twice downstream and
// the answered results lost.
//
// Memory: a Redis at maxmemory refuses the claim before the handler runs
// (the claim script is flagged so that Redis refuses it whole; the
// middleware answers 503 store-unavailable, Retry-After), so that a
// retry once memory is freed runs the operation once; the writes of an
// admitted attempt (extension, recovery point, completion, abort) and of
// the reconciler are flagged allow-oom and land past maxmemory, by at
// most the records of the operations running, because their effects
// happened. At maxmemory a replay is refused too (it is a claim).
//
// Eviction: an evicted record lets a retry run its operation again, and
// every record has an expiry, so the volatile-* policies evict them too.
// [New] refuses a server whose maxmemory-policy is not noeviction
// ([ErrEviction]), and the store reads the policy again while it runs: a
// claim reads it when the last reading is over a second old, and a write
// that finds the record its attempt held gone makes it read at once.
// While a master's policy may evict, every claim fails with ErrEviction
// naming the policy, and [Config.Logger] is told once, with an error;
// [Config.AllowEviction] turns the checks off.
package idemredis
