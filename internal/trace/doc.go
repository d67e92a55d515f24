// Package trace records, in tests, each step of a record's lifecycle that
// a store performs, and checks a recorded history against the transitions
// of the lifecycle's model (internal/model/idem.pml).
//
// A store reports a step with Emit. Emit does nothing unless a test
// started a Recorder: one atomic load of a counter, the whole cost of
// tracing in production. The stores of other modules (idemredis) and the
// suites of e2e import this package through the root module's internal/.
//
// Order. A step carries the interval of its call (Start, End: when the
// store sent its statement and when the answer came back). A store's
// commit of the step lies inside it, so the store's own commit order per
// scope is one of the orders consistent with the intervals: Check looks
// for one the model allows (a linearization, as Wing and Gong's
// linearizability check does), and reports the first step that no order
// can place. MemoryStore emits under its mutex, so its intervals do not
// overlap and its order is its commit order.
//
// Seeded faults. Seed switches on a fault seeded in a store's code (a
// mutant): the stores consult Seeded at the one statement each fault
// weakens. Like Emit, Seeded is an atomic load when no fault is seeded.
package trace
