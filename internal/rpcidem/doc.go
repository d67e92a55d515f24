// Package rpcidem is what the gRPC and the Connect adapters (grpcidem,
// connectidem) share: the stored result of a unary call, its encoding and
// decoding, the http.ResponseWriter the server adapter answers to, and
// the plumbing of the client interceptors' idem.Transport. Each adapter
// keeps its framework's types; this package knows only protobuf and
// net/http.
package rpcidem
