package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// maxRecoveryBytes caps the data of one recovery point, as
// [Lease.Checkpoint]'s doc states it.
const maxRecoveryBytes = 64 << 10

// ErrRecoveryData is returned by [Lease.Checkpoint] for data that is not one
// JSON value or is larger than 64 KiB.
var ErrRecoveryData = errors.New("server: recovery data must be one JSON value of at most 64 KiB")

// Recovery is what an earlier attempt of a [Leased] operation left behind: it
// may have partly run, and Point is the last recovery point it recorded
// ("" when it recorded none), with its Data (nil for none). [PostgresStore]
// keeps Data as jsonb, so it comes back as the same JSON value, not
// necessarily the same bytes.
type Recovery struct {
	Point string
	Data  json.RawMessage
}

// Lease is the claim of a Leased-mode request, as its handler sees it
// through [LeaseFrom]. Its methods are safe for concurrent use; the store's
// clock (the database's, Redis's, or the [MemoryStore]'s) judges its expiry.
type Lease struct {
	attempt  int
	recovery *Recovery // nil on a first attempt
	ttl      time.Duration
	ops      LeasedAttempt
	pointed  atomic.Bool // Checkpoint was called: the record may hold a point
}

// newLease is the handler's view of a [Leased] attempt whose lease is ttl.
func newLease(a LeasedAttempt, ttl time.Duration) *Lease {
	l := &Lease{attempt: a.Number(), ttl: ttl, ops: a}
	if rec, took := a.Recovery(); took {
		l.recovery = &rec
	}
	return l
}

// Attempt is 1 for the first attempt of the operation and n for the n-th,
// after n-1 takeovers of expired or failed attempts.
func (l *Lease) Attempt() int { return l.attempt }

// Recovery reports whether an earlier attempt of this operation may have
// partly run and, if so, the last recovery point it recorded, so that the
// handler can reconcile (resend the same downstream key, look the payment
// up) instead of acting twice.
func (l *Lease) Recovery() (Recovery, bool) {
	if l.recovery == nil {
		return Recovery{}, false
	}
	return *l.recovery, true
}

// Extend makes the lease run until d from now by the store's clock (the
// configured lease when d <= 0). The record then answers retries until at
// least one configured lease after the new end of the lease, even past its
// retention, so that a retry after the lease ends still takes the operation
// over with its recovery point. ctx governs the call. It returns
// [ErrLeaseLost] when another attempt has taken the key over.
func (l *Lease) Extend(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		d = l.ttl
	}
	return l.ops.Extend(ctx, d, l.ttl)
}

// Checkpoint records a recovery point: a name and small JSON data (one
// JSON value of at most 64 KiB, nil for none) that an attempt taking over
// after this one fails or expires will see in [Lease.Recovery]. Record one
// before each effect that leaves the database. ctx governs the call. It
// returns [ErrLeaseLost] when another attempt has taken the key over, and
// [ErrRecoveryData] for bad data.
func (l *Lease) Checkpoint(ctx context.Context, point string, data json.RawMessage) error {
	if data != nil && (len(data) > maxRecoveryBytes || !json.Valid(data)) {
		return fmt.Errorf("%w (got %d bytes)", ErrRecoveryData, len(data))
	}
	l.pointed.Store(true)
	return l.ops.Checkpoint(ctx, point, data)
}

// fence is the token-fenced side of a [Leased] attempt in this package's
// stores.
type fence interface {
	Complete(ctx context.Context, res *Response) error
	Abort(ctx context.Context, reject bool) error
	Extend(ctx context.Context, d, margin time.Duration) error
	Checkpoint(ctx context.Context, point string, data []byte) error
}

// leasedAttempt is a [Leased] claim of this package's stores: the fence and
// what the claim learned.
type leasedAttempt struct {
	fence
	g grant
}

// grant is what a won claim learned.
type grant struct {
	attempt  int
	recovery *Recovery // nil on a first attempt
}

func (a *leasedAttempt) Number() int { return a.g.attempt }

func (a *leasedAttempt) Recovery() (Recovery, bool) {
	if a.g.recovery == nil {
		return Recovery{}, false
	}
	return *a.g.recovery, true
}

// LeaseFrom returns the lease of the Leased-mode request that ctx belongs
// to. It returns false outside a [Leased] route.
func LeaseFrom(ctx context.Context) (*Lease, bool) {
	if x := runnerFrom(ctx); x != nil && x.ls != nil {
		return x.ls, true
	}
	return nil, false
}

// Tx returns the transaction of the [Transactional] request that ctx belongs
// to, when its store hands a pgx.Tx ([PostgresStore]; see [TxAttempt]). The
// handler makes its mutations in it; the middleware commits them together with the stored response, or
// rolls them back. The transaction is the middleware's: its Commit and
// Rollback return [ErrTxManaged] (those of a savepoint begun from it work),
// and once the handler has returned every method of it and of its
// savepoints returns pgx.ErrTxClosed (Conn nil). Do not keep a *pgx.Conn
// taken from it past the handler: the connection goes back to the pool.
// Its LargeObjects is pgx's unusable zero value: the middleware begins the
// transaction in the claim's own round trip, and pgx builds a usable
// LargeObjects only for a transaction it began (use the lo_* SQL
// functions instead). Tx returns nil, false with a [MemoryStore], on a
// [Leased] route, and outside the middleware.
//
// The handler must not end the transaction with SQL either (COMMIT, END,
// ROLLBACK, ABORT, PREPARE TRANSACTION, ... AND CHAIN, in any method of the
// Tx or through its Conn): what it did before would commit or roll back
// without the idempotency record, and the claim's lock would be gone. The
// middleware never stores a response then, and the request gets 500
// commit-failed, logged as an error. It sees most such escapes without
// parsing SQL or a round trip, from the transaction status the server
// reports at the end of each command (and from Exec's command tag COMMIT):
// the methods of the Tx then return [ErrTxEnded], which [Event.Err] carries. A
// transaction that one call ends and begins again ("COMMIT; BEGIN" in one
// string, ROLLBACK AND CHAIN), or that the Conn ends and begins again, is
// caught where the record is written: the claim marks its transaction (a
// transaction-local setting), and no record is written in a transaction
// without the mark. Effects that the handler committed itself stay
// committed, and with no record a retry runs the handler again.
func Tx(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := txOf(ctx).(pgx.Tx)
	return tx, ok
}
