// Package storetest checks that a [server.Store] keeps the contract the
// middleware relies on (see server.Store's doc), the way testing/fstest
// checks an fs.FS and River's riverdrivertest a driver: one call, [Run],
// runs every area a store must pass, on real requests through
// [server.Middleware] and on the store's own methods.
//
// A store's test gives Run a [Harness], whose one required field makes a
// fresh store whose clock the suite can move:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			New: func(t *testing.T, clock *storetest.Clock) server.Store {
//				return mystore.New(mystore.Config{Prefix: uniquePrefix(t), Offset: clock.Offset})
//			},
//		})
//	}
//
// The suite moves time by hours without sleeping: a store judges leases
// and retention by its own clock plus [Clock.Offset] (a test-only hook of
// the store; the offset only ever grows). Areas that need a mode the store
// refuses ([server.Store.CheckMode]) are not run, and the log says so: a
// Leased-only store passes the suite without its Transactional areas.
//
// The contract the suite checks is [server.Store]'s doc, rule by rule;
// the types a store exchanges with the middleware are those its methods
// name ([server.Claim], [server.ClaimResult], [server.Attempt] and
// [server.LeasedAttempt], [server.Taken] and [server.Settler]). A
// Transactional handler's effects must commit with its record: a store that
// offers the mode on a database hands the handler its transaction through
// a [server.TxAttempt] ([server.Tx] finds a pgx.Tx, [server.SQLTx] a
// *sql.Tx), and its Harness sets Effect and Effects to write and count an
// effect in it, which runs the Transactional areas (and EndTx and LoseConn
// their last two tests); a store with no transaction to hand refuses
// Transactional mode in CheckMode, as idemredis's does, and passes the
// Leased areas, for which the Harness needs only New (and Node, to run the
// two-node areas on two connections). A store that
// implements the optional [server.RecordStore], which idemctl and the
// admin page read, also runs the operator areas: a lookup with and
// without payload, a key found in every scope, the operations in flight
// and the stuck ones, eviction (refused on a live lease unless forced,
// the evicted attempt's completion then refused), exact counts, and,
// for a store that also implements the optional [server.RefReader] (the
// area skips, saying so, on one that does not), a lookup by the
// operation reference the answer carried.
//
// The areas: replay (byte for byte, headers, fingerprints, scopes,
// rejections, failures, retention, streamed results), the stored response
// (header values that are not UTF-8, repeated fields, empty values, large
// bodies, through Complete, a Settler and the middleware), leases (in flight,
// takeover with the recovery point, fencing of a stale attempt, extension,
// expiry margins), waits for a running Transactional attempt, the
// Transactional areas (the effect with the record, a 5xx and a panic
// rolling back, a handler that ends the transaction, a lost connection, a
// 100-way race of one key on two nodes), sweeps and
// stats, and the reconciler's side of the store (TakeAbandoned and the
// Settler: disjoint takers, due times, fencing, age), and, for a store
// that implements the optional [server.UncertainSettler] and
// [server.Resolver] (the areas skip, saying so, on one that does not), an
// uncertain operation: kept past its retention and a sweep, never taken
// again, resolved applied or not applied, refused on anything else. Each test runs in
// parallel with the others, each on a store of its own.
package storetest
