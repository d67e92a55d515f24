// Package replaytest is the kit that the tests of the replay middleware
// share: server's own tests, the conformance suite server/storetest, and
// the tests of the stores of the nested modules. It holds a loopback
// server ([Serve]), a request read in full ([Send], [Reply]), a bounded
// receive ([Recv]) and the payments handler ([Payments]).
//
// It does not import package server, so that server's internal tests can
// import it; what needs server's types (a Leased handler, a store's
// sweep) stays beside its tests.
package replaytest
