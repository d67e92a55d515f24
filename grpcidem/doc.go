// Package grpcidem runs idem's exactly-once replay (package server) for
// the unary RPCs of a grpc-go server. It is a module of its own
// (github.com/idemkit/idem/grpcidem), so that users of idem who do not
// speak gRPC do not get its dependencies.
//
// [UnaryServerInterceptor] is the one thing to install, over the same
// stores and modes as [server.Middleware]:
//
//	store := server.NewPostgresStore(pool)
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth,
//		grpcidem.UnaryServerInterceptor(store, grpcidem.Config{Scope: callerFromContext})))
//
// A keyed call (the idempotency-key metadata entry, or a field of the
// request message through [Config.Key], as AIP-155's request_id) runs at
// most once per key and scope; a retry gets the stored response message,
// status (code, message, details) and allowlisted metadata, marked by the
// idempotent-replayed header metadata entry. Every keyed answer, the first
// one, a replay or a refusal, says where its operation stands in header
// metadata ([MetadataOperationState], [MetadataOperationRef],
// [MetadataSafeNewKey], [MetadataKeyExpires]). The route is the call's full
// method name, the fingerprint the request message in deterministic proto
// encoding. The handler finds [server.Tx] and [server.LeaseFrom] in its
// context, as an HTTP handler does. Refusals are gRPC statuses with a
// google.rpc.ErrorInfo naming the problem and, where a retry should wait,
// a google.rpc.RetryInfo; docs/CONTRACT.md §11 has the mapping.
//
// Streaming RPCs are not intercepted: install no stream interceptor of
// this package, and a stream passes through untouched.
//
// The interceptor is a thin adapter over [server.Adapter]: every rule of
// the HTTP middleware holds, with the gRPC code of a handler's answer
// judged by the HTTP status the contract maps it to.
package grpcidem
