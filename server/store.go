package server

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/fingerprint"
)

// Store keeps idempotency records. The package has two, [PostgresStore]
// and [MemoryStore]; the nested module idemredis has a third, on Redis.
// Most callers only construct one and hand it to [Middleware],
// [RunSweeper] and [RunReconciler]. The rest of this comment is for the
// authors of a store: the middleware relies on exact semantics, stated
// here, and package storetest checks them (storetest.Run, one call, runs
// every area a store must pass; both stores of this package pass it).
//
// A store must give each [Claim] of a scope (tenant, principal, route,
// key: [Claim.Scope]) exactly one [Verdict], by these rules, and must
// exclude every other claim of the scope while an attempt that claimed it
// runs:
//
//   - Verdict. A claim that finds no record, or one whose retention has
//     passed and whose lease is not live, must claim it afresh (attempt
//     1). Otherwise a record whose digest the claim does not match
//     ([Claim.Matches]) must answer [VerdictMismatch]; a completed one
//     [VerdictReplay] with its [Response]; one completed as unavailable
//     [VerdictUnavailable]; a running one whose lease is live
//     [VerdictInFlight]; and a running one whose lease ended must be taken
//     over. In [Transactional] mode a running attempt is waited for first,
//     whatever its digest, as the Exclusion rule says.
//   - Exclusion. At most one attempt of a scope runs at a time. In
//     Transactional mode a second claim must wait for the running attempt,
//     at most [Claim.Wait] (covering its wait for a connection too), and
//     then judge the record anew: replay what committed, claim what was
//     released, or answer in flight when the wait ran out. In [Leased] mode a
//     claim that finds a live lease must answer in flight at once, with the
//     time left on the lease ([ClaimResult.RetryAfter]).
//   - Fencing. A Leased claim, a takeover and a reconciler's takeover must
//     each draw a new token and add one to the attempt number, atomically
//     with the check that the lease ended; every later write of an attempt
//     (Complete, Extend, Checkpoint, Abort, a [Settler]'s settlement) must
//     change nothing and return [ErrLeaseLost] unless its token is current.
//   - Durability. A Transactional attempt's Complete must make the
//     handler's mutations and the record durable together or not at all,
//     and must report an error when it cannot tell; a Leased claim must be
//     durable before the handler runs (a replicated store says what a
//     failover can lose).
//   - Time. Leases and retention are judged by one clock for every node
//     (the database's, for PostgresStore). A record whose lease is live
//     must never be treated as expired or swept; a takeover must extend the
//     record's expiry to a full retention; an extension must keep it at
//     least one lease past the lease's new end.
//   - Response. A replay must give back the [Response] that was stored,
//     byte for byte (header values that are not UTF-8 included). A store
//     should keep it in the stored form of every store,
//     [Response.MarshalBinary], and must answer an error, never a replay,
//     for a stored response it cannot read whole.
//   - Fingerprint. A record must keep its digest with the name of the
//     algorithm that made it ([Claim.DigestAlg]), and judge a later claim
//     by [Claim.Matches] on the two.
//
// A store that offers Transactional mode on a database hands the handler
// the claim's transaction through a [TxAttempt], whose doc states what it
// must then guarantee.
//
// A store should be safe for concurrent use (both of this package's are),
// and must be when several nodes or goroutines share it.
type Store interface {
	// CheckMode returns nil when the store can claim keys in mode, and
	// otherwise an error that says why not: [Middleware] panics with it,
	// so that a route the store cannot protect is refused when it is
	// mounted, not at its first request.
	CheckMode(mode Mode) error

	// Claim judges the record of c's scope and claims it when the request
	// may run ([VerdictClaimed], with the [Attempt]), by the rules above.
	// ctx governs the claim; an error means nothing was claimed.
	Claim(ctx context.Context, c *Claim) (ClaimResult, error)

	// TakeAbandoned takes over at most limit abandoned operations of
	// routes (running in [Leased] mode, lease ended, due for a reconciler,
	// within retention), oldest lease first, each under a new token, the
	// next attempt number and a lease of its own, skipping any that
	// another claim or reconciler holds. ctx governs the call.
	TakeAbandoned(ctx context.Context, routes []string, lease time.Duration, limit int) ([]*Taken, error)

	// Sweep deletes at most limit records whose retention has passed and
	// returns how many it deleted. ctx governs the call. It must never wait
	// for a record that a request holds, and must keep a record whose lease
	// is live. A store whose records expire by themselves (Redis's key
	// expiry) may delete none.
	Sweep(ctx context.Context, limit int) (int, error)

	// Stats counts the records in flight and the age of the oldest (see
	// [StoreStats]), for a gauge. ctx governs the call. It must not wait for
	// a record that a request holds.
	Stats(ctx context.Context) (StoreStats, error)
}

// ErrLeaseLost is returned by [Lease] methods, and reported to hooks as a
// stale completion, when another attempt has taken the key over (or the
// record expired): this attempt no longer owns the operation. A store's
// fenced writes ([Attempt], [LeasedAttempt], [Settler]) return it for a
// stale token.
var ErrLeaseLost = errors.New("server: lease lost: another attempt owns the key")

// ErrUnstorableScope is what a store's Claim should return (wrapped) when
// it cannot keep the request's scope at all, whatever the retry: a
// tenant, principal or route whose bytes its columns refuse (PostgreSQL's
// text takes no NUL byte and only UTF-8). The middleware answers it 400
// scope-unstorable, never 503, since a retry cannot succeed
// (docs/CONTRACT.md §4).
var ErrUnstorableScope = errors.New("server: the store cannot keep this scope")

// errClaimContention is returned when a claim kept finding the record
// changed under it (deleted, taken over) and gave up.
var errClaimContention = errors.New("server: claim did not settle: the record kept changing")

// Claim is everything a store needs to claim one request's key, as
// [Middleware] hands it to [Store.Claim]. A store must not change it.
type Claim struct {
	// Scope identifies the record: a SHA-256 of Tenant, Principal, Route
	// and Key. A store keys its records by it.
	Scope [32]byte
	// Tenant, Principal, Route and Key name the operation (see
	// [Operation]); a store keeps them for a [Taken]'s Operation.
	Tenant, Principal, Route, Key string
	// Digest is the request's fingerprint, made by the algorithm named
	// DigestAlg; a new record keeps both.
	Digest    []byte
	DigestAlg string
	// Mode is the route's mode: [Transactional] or [Leased].
	Mode Mode
	// Lease is the length of a [Leased] attempt's lease.
	Lease time.Duration
	// Retention is how long the record answers retries.
	Retention time.Duration
	// Wait bounds a [Transactional] claim's wait for a running attempt of
	// the scope and for a connection; 0: no wait.
	Wait time.Duration
	// Request is the stored form of the request ([Leased] mode, nil
	// otherwise), which a store keeps for [Taken.Request].
	Request []byte

	in *fingerprint.Input // for a record stored by another algorithm
}

// Matches reports whether a stored digest made with the algorithm alg is
// this request's. A digest made by an algorithm this version does not know
// (a newer node's) is accepted: refusing it would turn honest retries into
// 422s.
func (c *Claim) Matches(alg string, stored []byte) bool {
	digest, known := c.DigestWith(alg)
	return !known || bytes.Equal(digest, stored)
}

// DigestWith returns the request's digest by the algorithm alg, and false
// when this version does not know alg (Matches then accepts). A store that
// compares digests where Go cannot run (a Redis script) compares the one
// this returns for the record's algorithm.
func (c *Claim) DigestWith(alg string) ([]byte, bool) {
	if alg == c.DigestAlg {
		return c.Digest, true
	}
	if c.in == nil {
		return nil, false
	}
	return fingerprint.SumWith(alg, c.in)
}

// Verdict is what a claim gets from a record.
type Verdict int

const (
	// VerdictClaimed: this request owns the key; the handler runs under
	// [ClaimResult.Attempt].
	VerdictClaimed Verdict = iota
	// VerdictReplay: the stored [ClaimResult.Response] answers the request.
	VerdictReplay
	// VerdictInFlight: another attempt runs (409 key-in-flight), for
	// [ClaimResult.RetryAfter] more.
	VerdictInFlight
	// VerdictMismatch: the key was used for another request (422
	// key-reused).
	VerdictMismatch
	// VerdictUnavailable: the operation's effects happened, its response
	// was not stored (500 result-unavailable).
	VerdictUnavailable
	// VerdictUncertain: no one could tell whether the operation acted; it
	// waits for an operator (409 outcome-uncertain, see [UncertainSettler]).
	VerdictUncertain
)

// The judgements of decide that are not a final [Verdict].
const (
	vReclaim  Verdict = iota + 100 // expired: claim afresh
	vWait                          // an open transaction holds it: wait, then look again
	vTakeover                      // an expired lease: take it over
)

// ClaimResult is the answer of [Store.Claim].
type ClaimResult struct {
	Verdict Verdict
	// Response is the stored response ([VerdictReplay]).
	Response *Response
	// RetryAfter is the time left on the lease that answered
	// [VerdictInFlight]; 0 when unknown (the middleware then says 1 s).
	RetryAfter time.Duration
	// Attempt is the claimed attempt ([VerdictClaimed]). In [Leased] mode it
	// must be a [LeasedAttempt].
	Attempt Attempt
	// Waited reports a claim that waited for a running duplicate (see
	// [Event.Waited]).
	Waited bool
	// Expires is when the record's retention ends, by the store's clock, as
	// the claim found or made it; zero when the store does not tell (the
	// middleware then says its own start of the claim plus the retention
	// for a claimed key, and nothing for a replay). An uncertain record
	// has none: it is kept until an operator resolves it.
	Expires time.Time
}

// inFlight is the 409 answer, to retry after left (at least a second).
func inFlight(left time.Duration) ClaimResult {
	return ClaimResult{Verdict: VerdictInFlight, RetryAfter: left}
}

// Attempt is one claimed run of the handler, as a store hands it to the
// middleware. The middleware calls exactly one of Complete and Abort,
// once, after the handler returned or started streaming, and nothing of
// the attempt after that.
type Attempt interface {
	// Number is 1 for a first claim, n for the n-th attempt after
	// takeovers.
	Number() int
	// Complete stores res and makes the attempt durable: commit, or
	// completion under the current token ([ErrLeaseLost] when it is
	// stale). Any error means the caller must not send the handler's
	// response. ctx governs the call.
	Complete(ctx context.Context, res *Response) error
	// Abort ends a failed attempt: rollback ([Transactional]), or in [Leased]
	// mode the release of the key (the record is deleted) when reject (the
	// request was refused) and the attempt is a first one that recorded no
	// recovery point, else the end of the lease now, keeping the record and
	// its recovery point for the next attempt to take over. ctx governs the
	// call.
	Abort(ctx context.Context, reject bool) error
}

// LeasedAttempt is the [Attempt] of a [Leased] claim: the token-fenced writes
// behind the handler's [Lease] ([ErrLeaseLost] for a stale token).
type LeasedAttempt interface {
	Attempt
	// Recovery is what the attempt that this one took over left (Point ""
	// when it recorded none), and false on a first attempt.
	Recovery() (Recovery, bool)
	// Extend makes the lease end d from now, and the record's expiry at
	// least margin after that.
	Extend(ctx context.Context, d, margin time.Duration) error
	// Checkpoint records a recovery point (data nil for none), which a
	// later takeover's Recovery returns. A point recorded, even "", keeps
	// a refused first attempt's Abort from releasing the key.
	Checkpoint(ctx context.Context, point string, data []byte) error
}

// TxAttempt is the [Attempt] of a [Transactional] claim whose handler makes
// its mutations in the claim's own database transaction: [Tx] hands it to
// the handler when it is a pgx.Tx, [SQLTx] when it is a *sql.Tx. Any store
// may offer Transactional mode this way ([PostgresStore] hands a pgx.Tx,
// [PostgresSQLStore] a *sql.Tx); package storetest's Transactional areas
// check the rules below. A store that answers a claim with a TxAttempt
// must:
//
//   - Lock. Begin the transaction in the claim and hold the scope's
//     exclusion in it (a lock) until the transaction ends, so that a
//     duplicate waits for the commit or the rollback and then replays or
//     claims, as [Store]'s Exclusion rule says.
//   - Once. Write the record in that transaction, once, as Complete
//     commits it: the handler's mutations and the record become durable
//     together or not at all, and a rollback leaves no record.
//   - Roll back. End the transaction in Abort without committing: the
//     middleware calls Abort for a 5xx, a rejection status and a handler
//     that panicked, and the record and the mutations then vanish together.
//   - Report. Return an error from Complete whenever it cannot tell that
//     the commit happened. The middleware holds the handler's response until
//     Complete returns and then never sends it, but 500 commit-failed, or
//     503 with Retry-After when the error says the database was lost (a
//     broken or closed connection, a server shutting down): the error
//     must then wrap driver.ErrBadConn, a net.Error, io.ErrUnexpectedEOF or
//     pgx's own, which the middleware classifies.
//   - Catch. Notice a handler that ended the transaction itself (its
//     Commit or Rollback, or SQL such as COMMIT): Complete must then write
//     no record and return an error that wraps [ErrTxEnded], because what
//     the handler did may have committed without the record, or rolled
//     back. Where the store cannot see it, its doc must say what happens.
//   - Close. Make the transaction refuse work once Complete or Abort
//     returned (pgx.ErrTxClosed, sql.ErrTxDone), so that a handler that kept
//     it cannot write outside the claim.
//
// A store whose Transactional claims are no database transaction
// ([MemoryStore]'s) answers with a plain Attempt: [Tx] and [SQLTx] then
// report none.
type TxAttempt interface {
	Attempt
	// Tx returns the handler's transaction, a pgx.Tx or a *sql.Tx (or
	// another client's, which the store's own accessor returns). It must
	// return the same value for the attempt's whole life.
	Tx() any
}

// Taken is an abandoned operation that [Store.TakeAbandoned] took over for
// a reconciler, under a token of its own.
type Taken struct {
	// Operation names it; Attempt is the reconciler's new attempt number.
	Operation
	// Recovery is the last recovery point an attempt recorded.
	Recovery Recovery
	// Request is the stored request ([Claim.Request]).
	Request []byte
	// Age is the time since the operation was first claimed, by the
	// store's clock.
	Age time.Duration
	// Settler stores the reconciler's answer under the token it took the
	// operation over with.
	Settler Settler
}

// Settler stores a reconciler's answer about a [Taken] operation; each
// method must change nothing and return [ErrLeaseLost] when another
// attempt owns the operation by then. ctx governs each call.
type Settler interface {
	// Complete stores res, a response or, Unavailable, a parked
	// operation's result-unavailable.
	Complete(ctx context.Context, res *Response) error
	// Free deletes the record: a later retry runs afresh.
	Free(ctx context.Context) error
	// Postpone ends the lease now and makes the operation due for a
	// reconciler again after wait.
	Postpone(ctx context.Context, wait time.Duration) error
}

// recordState is the state column of a record.
type recordState string

const (
	stateRunning     recordState = "running"     // claimed; the handler runs
	stateDone        recordState = "done"        // the response is stored
	stateUnavailable recordState = "unavailable" // effects committed, response not stored
	stateUncertain   recordState = "uncertain"   // not known at MaxAge: an operator settles it
	stateNotApplied  recordState = "not-applied" // an operator said it did not act: the key is free
)

// found is an existing record as a store read it, judged at the store's now.
type found struct {
	fpAlg     string
	fp        []byte
	state     recordState
	expired   bool          // past its retention: counts as absent
	open      bool          // running in an open in-memory transaction: wait for it
	leaseLeft time.Duration // running under a lease: time left (<= 0: expired)
	token     uuid.UUID
	resp      *Response
	expiresAt time.Time // the end of its retention; zero when unknown
}

// leased reports a running record whose lease is live: its attempt may be
// running now, so it is never treated as expired, whatever its retention
// says (a takeover or Extend pushes the expiry past the lease, but records
// of older versions, or written by hand, may not have that margin).
func (f *found) leased() bool {
	return f.state == stateRunning && f.leaseLeft > 0
}

// decide judges a found record for c. A request waits for an open attempt
// whatever its fingerprint, as it waits for a Postgres transaction's lock:
// a corrected retry of a request that ends in a rejection status is then
// processed instead of refused with 422 (docs/CONTRACT.md §4).
func decide(f *found, c *Claim) Verdict {
	switch {
	case (f.expired || f.state == stateNotApplied) && !f.open && !f.leased() && f.state != stateUncertain:
		return vReclaim
	case f.open:
		return vWait
	case !c.Matches(f.fpAlg, f.fp):
		return VerdictMismatch
	case f.state == stateDone:
		return VerdictReplay
	case f.state == stateUnavailable:
		return VerdictUnavailable
	case f.state == stateUncertain:
		return VerdictUncertain
	case f.leaseLeft > 0:
		return VerdictInFlight
	default:
		return vTakeover
	}
}

// result turns a final verdict on f (not vWait) into a [ClaimResult].
func (f *found) result(v Verdict) ClaimResult {
	switch v {
	case VerdictReplay:
		return ClaimResult{Verdict: VerdictReplay, Response: f.resp, Expires: f.expiresAt}
	case VerdictInFlight:
		return inFlight(f.leaseLeft)
	default:
		return ClaimResult{Verdict: v}
	}
}

// CheckMode accepts both modes: the store joins a [Transactional]
// handler's database transaction ([Tx]).
func (s *PostgresStore) CheckMode(Mode) error { return nil }

// CheckMode accepts both modes; a [Transactional] claim is held in memory.
func (m *MemoryStore) CheckMode(Mode) error { return nil }
