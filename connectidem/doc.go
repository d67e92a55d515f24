// Package connectidem runs idem for the unary RPCs of connect-go, on both
// sides, in a module of its own (github.com/idemkit/idem/connectidem), so
// that users of idem who do not use Connect do not get its dependencies.
//
//   - [NewServerInterceptor]: a handler option (connect.WithInterceptors)
//     that runs each keyed unary call at most once per key and scope and
//     replays the stored result to every retry, over the same stores and
//     modes as [server.Middleware], whatever the protocol (Connect, gRPC,
//     gRPC-Web).
//   - [NewClientInterceptor]: a client option that sends each unary call
//     through idem's client: one key per logical call, retries of what is
//     safe, budget, breaker, waiting for the target as gRPC's
//     wait-for-ready does, the same errors and observer events as the
//     HTTP client.
//
// The key is the Idempotency-Key request header (gRPC metadata
// idempotency-key), or a request field through [Config.Key]; the route is
// the procedure ("/pkg.Service/Method"); the fingerprint is the request
// message in deterministic protobuf encoding. The stored result is the
// response message or the error (code, message, details) with the
// allowlisted headers and trailers; a replay is marked with the
// Idempotent-Replayed header. Every keyed answer, the first one, a replay
// or a refusal, says where its operation stands in the
// Idempotency-Operation-State, -Ref, Idempotency-Safe-New-Key and
// Idempotency-Key-Expires headers (an error's metadata). Refusals are *connect.Error values with the
// codes and details of docs/CONTRACT.md §11. Streaming calls are not
// intercepted.
//
// A replayed message is a *dynamicpb.Message of the stored type (which
// must be linked into the program, as generated code is): connect sends it
// with the same encoding as the handler's own, but a handler-side
// interceptor outside this one sees that type, not the generated one.
package connectidem
