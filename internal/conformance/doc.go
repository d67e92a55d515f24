// Package conformance checks from the outside that an HTTP endpoint honours
// the Idempotency-Key contract: it is the engine of the idemcheck command.
//
// Run sends a battery of requests to one endpoint and returns a Report
// with one Result per check (pass, fail with the exchanges that show it,
// not applicable, or information). The checks are listed by CheckNames;
// baseline always runs first, since every other check needs one operation
// that succeeds.
//
// What a check can prove depends on how effects are observed (Effects):
// by the responses' bodies alone, by the ids in them, or by a counter that
// grows by one per effect, which alone sees effects whose responses were
// lost. The faults check drives the idem client through a testserver
// fault proxy and needs the counter.
package conformance
