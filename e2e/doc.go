// Package e2e is the end-to-end evidence for idem's central claim: through
// network faults, process crashes, database faults and races, every
// operation made with the idem client against a server built with package
// server takes effect exactly once, and the client never reports a success
// that did not happen or a failure that did.
//
// The package holds tests only. The suites below run on loopback against
// real PostgreSQL (DATABASE_URL, each test in a schema of its own, see
// internal/pgtest; TestPostgresRestart and TestFailover in private
// clusters they start, see internal/pgcluster),
// use the payments API of examples/payments/api as the application, and
// take their ground truth from the database (the payments or charges
// rows and the account balances), never from the client; the rest are
// unit tests of the suites' own helpers:
//
//   - TestChaos: the idem client, a fault-injecting proxy (testserver) in
//     front of two server nodes with separate connection pools, one
//     database, and a seeded mix of every fault kind of testserver,
//     including the hold-until-retry race. 2,000 operations by default.
//   - TestChaosCharges: the same chaos on POST /v1/charges, a Leased route
//     that charges a fake card gateway (api.Gateway) before it credits the
//     account, with a second fault proxy, under the same mix, on the nodes'
//     gateway leg: a failed gateway call ends the lease, and the retry takes
//     the operation over from its recovery point. Its ground truth adds the
//     gateway's count and total of charges. 500 operations.
//   - TestChaosChargesRedis: TestChaosCharges with the charges' idempotency
//     records on Redis (REDIS_ADDR): two processes of
//     idemredis/example/server (-redis) behind the same two fault proxies;
//     the same ground truth, and the takeovers counted from the nodes'
//     logs.
//   - TestChaosReplaysWithSeed: two runs with one seed meet the same fault
//     at every (operation, attempt).
//   - TestProcessCrash: the server program (examples/payments/server) is
//     killed with SIGKILL after the claim, after the mutation and after the
//     commit, under load, and restarted by a supervisor in the test.
//   - TestStalledAttemptTakenOver: a server program's attempt of a card
//     charge stalls (its crash switch pauses it) after it charged the card
//     and recorded the charge, and loses its lease; the other node takes the
//     charge over from that recovery point, and the stalled attempt's
//     completion, once it goes on, is refused as stale.
//   - TestReconciler: card charges abandoned by a server program that dies
//     or stalls, whose client never retries, settled by the nodes'
//     reconcilers (-reconcile): a node killed after the gateway charged,
//     or paused (crash switch, then SIGSTOP) after it recorded the charge,
//     is completed within the lease plus one interval, with one gateway
//     charge and one credit, a retry replays it, and the paused node's late
//     completion is fenced off (409); a node killed before it called the
//     gateway is freed and the next retry charges once; a charge that the
//     gateway cannot tell (its lookups answer 503) until the maximum age
//     is left uncertain, and a retry gets 409 outcome-uncertain, never a
//     second charge; a reconciler killed in mid-settlement (after it
//     credited the charge) is succeeded by another with a higher attempt
//     number: one settlement, one credit. That two reconcilers over 1,000
//     abandoned operations settle each once is server's
//     TestTwoReconcilersSettleEachOperationOnce (real Postgres and memory).
//   - TestTerminatedBackends and TestPostgresRestart: the connections of
//     in-flight transactions are terminated, and a private PostgreSQL
//     cluster is restarted, under load.
//   - TestRetention: a retry after the retention period executes again; one
//     inside it replays.
//   - TestFailover: a primary and a streaming standby (private clusters),
//     the server program on a multi-host URL with
//     target_session_attrs=read-write; the primary is killed with SIGKILL
//     under keyed load and the standby promoted. Synchronous replication:
//     no double, no lost ok, every unknown outcome resolved by a resend
//     with its key, the server serving again within 1 s of the promotion
//     without a restart. Asynchronous, with the WAL sender stalled: oks
//     are lost (required: the stall must bite), never doubled. Each run
//     logs its figures (BENCHMARKS.md, Failover), the operations that
//     failed among them.
//
// A failing seeded test prints its seed; rerun it with the same faults:
//
//	IDEM_SEED=<seed> go test -race -run TestChaos ./e2e
//
// A soak run makes more operations (the flag or the environment variable):
//
//	go test -race -run 'TestChaos$' -timeout 2h ./e2e -e2e.ops=100000
//	IDEM_E2E_OPS=100000 go test -race -run 'TestChaos$' -timeout 2h ./e2e
//	go test -race -run 'TestChaosCharges$' -timeout 2h ./e2e -e2e.charges=20000
//	go test -race -run 'TestChaosChargesRedis$' -timeout 2h ./e2e -e2e.charges=20000
package e2e
