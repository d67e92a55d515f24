// Package frameworks holds the examples of docs/frameworks.md, one file
// per framework, each equal to its block of the guide (the root module's
// docs tests hold them to it), and runs them against Postgres. It is a
// module of its own, so that the root module names no framework: it
// imports the adapters (ginidem, echoidem, echo5idem), chi and
// gorilla/mux, which stay plain net/http. Its benchmarks set each adapter
// beside the net/http middleware (BENCHMARKS.md).
package frameworks
