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
// MemoryStore. The interface is sealed (its claim method is unexported)
// because the middleware relies on their exact semantics; both are safe for
// concurrent use.
type Store interface {
	// Sweep deletes at most limit records whose retention has passed and
	// returns how many it deleted. ctx governs the call. It never waits for
	// a record that a request holds.
	Sweep(ctx context.Context, limit int) (int, error)

	claim(ctx context.Context, c *claimArgs) (claimResult, error)
	// takeAbandoned takes over at most limit abandoned operations of
	// routes (running, lease ended, due for a reconciler), each under a new
	// token and a lease of its own.
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
type attempt interface {
	// number is 1 for a first claim, n for the n-th attempt after takeovers.
	number() int
	// handlerTx is the transaction the handler works in, or nil.
	handlerTx() pgx.Tx
	// lease is the Leased-mode API, or nil.
	lease() *Lease
	// complete stores res and makes the attempt durable: commit, or
	// completion under the current token (ErrLeaseLost when it is stale).
	complete(ctx context.Context, res *response) error
	// abort ends a failed attempt: rollback, or release of the key (reject:
	// the request was refused and nothing happened) or the end of the lease.
	abort(ctx context.Context, reject bool) error
}
