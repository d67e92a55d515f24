package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Store keeps idempotency records. The package has two: PostgresStore and
// MemoryStore. Most callers only construct one and hand it to Middleware,
// RunSweeper and RunReconciler. The interface is sealed (its claim methods
// are unexported) because the middleware relies on exact semantics, which
// this comment states for the maintainers of a store; the conformance suite
// that every store must pass is the set of tests of this package that run
// on each store (eachStore in helpers_test.go: a new store joins its list).
//
// A store must give each claim of a scope (tenant, principal, route, key)
// exactly one verdict, as decide states them, and must exclude every other
// claim of the scope while an attempt that claimed it runs:
//
//   - Exclusion. At most one attempt of a scope runs at a time. In
//     Transactional mode a second claim must wait for the running attempt,
//     at most claimArgs.wait (covering its wait for a connection too), and
//     then judge the record anew: replay what committed, claim what was
//     released, or answer in flight when the wait ran out. In Leased mode a
//     claim that finds a live lease must answer in flight at once, with the
//     time left on the lease.
//   - Fencing. A Leased claim, a takeover and a reconciler's takeover must
//     each draw a new token and add one to the attempt number, atomically
//     with the check that the lease ended; every later write of an attempt
//     (complete, extend, checkpoint, abort, a reconciler's settlement) must
//     change nothing and return ErrLeaseLost unless its token is current.
//   - Durability. A Transactional attempt's complete must make the handler's
//     mutations and the record durable together or not at all, and must
//     report an error when it cannot tell; a Leased claim must be durable
//     before the handler runs.
//   - Time. Leases and retention are judged by one clock for every node
//     (the database's, for PostgresStore). A record whose lease is live
//     must never be treated as expired or swept; a takeover must extend the
//     record's expiry to a full retention; an extension must keep it at
//     least one lease past the lease's new end.
//   - Fingerprint. A record must keep its digest with the name of the
//     algorithm that made it (claimArgs.matches compares the two).
//
// Both stores are safe for concurrent use.
type Store interface {
	// Sweep deletes at most limit records whose retention has passed and
	// returns how many it deleted. ctx governs the call. It must never wait
	// for a record that a request holds, and must keep a record whose lease
	// is live.
	Sweep(ctx context.Context, limit int) (int, error)

	// Stats counts the records in flight and the age of the oldest (see
	// StoreStats), for a gauge. ctx governs the call. It must not wait for
	// a record that a request holds.
	Stats(ctx context.Context) (StoreStats, error)

	// claim judges the record of c's scope and claims it when the request
	// may run (verdict vClaimed, with the attempt), by the rules above.
	// ctx governs the claim; an error means nothing was claimed.
	claim(ctx context.Context, c *claimArgs) (claimResult, error)
	// takeAbandoned takes over at most limit abandoned operations of
	// routes (running in Leased mode, lease ended, due for a reconciler,
	// within retention), each under a new token and a lease of its own,
	// skipping any that another claim or reconciler holds.
	takeAbandoned(ctx context.Context, routes []string, lease time.Duration, limit int) ([]*taken, error)
}

// ErrLeaseLost is returned by Lease methods, and reported to hooks as a
// stale completion, when another attempt has taken the key over (or the
// record expired): this attempt no longer owns the operation.
var ErrLeaseLost = errors.New("server: lease lost: another attempt owns the key")

// errClaimContention is returned when a claim kept finding the record
// changed under it (deleted, taken over) and gave up.
var errClaimContention = errors.New("server: claim did not settle: the record kept changing")

// recordState is the state column of a record.
type recordState string

const (
	stateRunning     recordState = "running"     // claimed; the handler runs
	stateDone        recordState = "done"        // the response is stored
	stateUnavailable recordState = "unavailable" // effects committed, response not stored
)

// claimArgs is everything a store needs to claim one request's key.
type claimArgs struct {
	scope                         [32]byte
	tenant, principal, route, key string
	fp                            []byte   // fingerprintAlg digest of in
	in                            *fpInput // for a record stored by another algorithm
	mode                          Mode
	lease, retention, wait        time.Duration
	request                       []byte // Leased mode: the stored request (encodeRequest), for a reconciler
}

// matches reports whether a stored digest made with alg is this request's.
// A digest made by an algorithm this version does not know (a newer node's)
// is accepted: refusing it would turn honest retries into 422s.
func (c *claimArgs) matches(alg string, stored []byte) bool {
	digest := c.fp
	if alg != fingerprintAlg {
		var known bool
		if digest, known = fingerprintWith(alg, c.in); !known {
			return true
		}
	}
	return bytes.Equal(digest, stored)
}

// response is a captured handler response, as stored and replayed.
type response struct {
	state  recordState // stateDone or stateUnavailable
	status int
	header http.Header
	body   []byte
}

// ownHeader returns r with a header of its own: a replay hands the header's
// slices to a ResponseWriter, and a record kept in memory must not change
// with them. The body is shared: nothing writes to it.
func (r *response) ownHeader() *response {
	if r == nil {
		return nil
	}
	c := *r
	c.header = r.header.Clone()
	return &c
}

// found is an existing record as a store read it, judged at the store's now.
type found struct {
	fpAlg     string
	fp        []byte
	state     recordState
	expired   bool          // past its retention: counts as absent
	open      bool          // running in an open in-memory transaction: wait for it
	leaseLeft time.Duration // running under a lease: time left (<= 0: expired)
	token     uuid.UUID
	resp      *response
}

// leased reports a running record whose lease is live: its attempt may be
// running now, so it is never treated as expired, whatever its retention
// says (a takeover or Extend pushes the expiry past the lease, but records
// of older versions, or written by hand, may not have that margin).
func (f *found) leased() bool {
	return f.state == stateRunning && f.leaseLeft > 0
}

// verdict is what a request gets from a record.
type verdict int

const (
	vClaimed     verdict = iota // this request owns the key: run the handler
	vReplay                     // replay the stored response
	vInFlight                   // 409 key-in-flight
	vMismatch                   // 422 key-reused
	vUnavailable                // 500 result-unavailable
	vReclaim                    // expired: claim afresh
	vWait                       // an open transaction holds it: wait, then look again
	vTakeover                   // an expired lease: take it over
)

// decide judges a found record for c. A request waits for an open attempt
// whatever its fingerprint, as it waits for a Postgres transaction's lock:
// a corrected retry of a request that ends in a rejection status is then
// processed instead of refused with 422 (docs/CONTRACT.md §4).
func decide(f *found, c *claimArgs) verdict {
	switch {
	case f.expired && !f.open && !f.leased():
		return vReclaim
	case f.open:
		return vWait
	case !c.matches(f.fpAlg, f.fp):
		return vMismatch
	case f.state == stateDone:
		return vReplay
	case f.state == stateUnavailable:
		return vUnavailable
	case f.leaseLeft > 0:
		return vInFlight
	default:
		return vTakeover
	}
}

// claimResult is the answer of Store.claim.
type claimResult struct {
	verdict    verdict // vClaimed, vReplay, vInFlight, vMismatch or vUnavailable
	resp       *response
	retryAfter time.Duration
	att        attempt // set with vClaimed
	waited     bool    // the claim waited for a running duplicate
}

// inFlight is the 409 answer, to retry after left (at least a second).
func inFlight(left time.Duration) claimResult {
	return claimResult{verdict: vInFlight, retryAfter: left}
}

// result turns a final verdict on f (not vWait) into a claimResult.
func (f *found) result(v verdict) claimResult {
	switch v {
	case vReplay:
		return claimResult{verdict: vReplay, resp: f.resp}
	case vInFlight:
		return inFlight(f.leaseLeft)
	default:
		return claimResult{verdict: v}
	}
}

// attempt is one claimed run of the handler.
// The middleware calls exactly one of complete and abort, once, after the
// handler returned or started streaming, and nothing of the attempt after
// that.
type attempt interface {
	// number is 1 for a first claim, n for the n-th attempt after takeovers.
	number() int
	// handlerTx is the transaction the handler works in, or nil.
	handlerTx() pgx.Tx
	// lease is the Leased-mode API, or nil.
	lease() *Lease
	// complete stores res and makes the attempt durable: commit, or
	// completion under the current token (ErrLeaseLost when it is stale).
	// Any error means the caller must not send the handler's response.
	complete(ctx context.Context, res *response) error
	// abort ends a failed attempt: rollback (Transactional), or in Leased
	// mode the release of the key when reject (the request was refused) and
	// the attempt is a first one that recorded no recovery point, else the
	// end of the lease now, keeping the record and its recovery point.
	abort(ctx context.Context, reject bool) error
}
