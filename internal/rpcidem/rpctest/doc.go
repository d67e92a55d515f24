// Package rpctest holds the test helpers grpcidem's and connectidem's
// tests share: the sample payments API (adaptertest's) as an RPC service,
// the HTTP gateway in front of it that the conformance run talks to, and
// a fast client Config. Only tests import it.
package rpctest
