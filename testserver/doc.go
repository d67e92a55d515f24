// Package testserver produces, on demand, the HTTP failures that make
// retries dangerous, and checks afterwards that every operation took effect
// exactly once.
//
// A [Server] is like an httptest.Server ([New] wraps any http.Handler, [NewProxy]
// puts the same faults in front of upstream URLs) that listens on loopback
// only and applies Rules to each request. A rule matches requests (method,
// path, header, operation id, attempt number of that operation, global
// request index, time window) and decides a [Fault], either from a script per
// attempt or by a seeded draw. Faults come in three groups, each constant of
// [FaultKind] saying what it does, and [Kinds] listing them all:
//
//   - before the handler runs, so the operation certainly did not happen: an
//     error status, a reset or closed or silent connection, a delayed or slowly
//     read request;
//   - after the handler ran, so the client cannot tell whether it did
//     ([FaultKind.AfterHandler] reports these): the response dropped, delayed,
//     cut short, sent slowly or replaced by an error status;
//   - races: [FaultHold] keeps an attempt back until its retry arrives.
//
// The operation id of a request is its idempotency key (the
// Idempotency-Key header, or the one [Config.KeyHeader] names), else the value of
// [Config.OperationHeader], else none (each such request is its own
// operation). Attempt n of an operation is the n-th request with its id to
// reach the server. A seeded decision depends only on (seed, rule, operation
// id, attempt), never on a shared random stream, so one seed gives the same
// fault to every (operation, attempt) however the goroutines interleave.
//
// Ground truth comes in three parts. The Server keeps an [Event] per request:
// what arrived, on which connection, which fault was applied, whether the
// handler ran and what went out. A [Ledger] records the business effects per
// operation (live from a handler, or after the fact from a database), and a
// [History] records what the client concluded for each operation: ok with a
// result, a definite failure, or an unknown outcome. [Check] compares the two
// and returns a [Report] whose violations are the bugs that idempotency keys
// exist to prevent.
//
// A seeded test calls [Seed](t), which logs the seed and reads IDEM_SEED, so
// that a failing run can be replayed with the same faults. The program
// testserver/cmd/faultproxy puts the same rules in front of a server
// written in any language.
//
// Note on net/http clients: http.Transport silently resends a request once
// when a reused keep-alive connection breaks before any response byte and
// the request is replayable: its body is absent or rewindable (GetBody is
// set, as http.NewRequest does for a bytes or strings reader), and its
// method is GET, HEAD, OPTIONS or TRACE, or it carries an Idempotency-Key
// (or X-Idempotency-Key) header. The event log counts each such resend
// as an attempt of its own; tests that count attempts client-side either
// expect it or give each attempt a fresh connection.
//
// Everything in the package is safe for concurrent use.
package testserver
