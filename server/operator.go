package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// Errors of an [Operator], in the operator's terms. Each comes back wrapped
// with the detail; test with errors.Is.
var (
	// ErrUnknownKey: no record has this scope (tenant, principal, route
	// and key). A retry with the key runs the handler as a first request.
	ErrUnknownKey = errors.New("server: no record for this key in this scope")
	// ErrLeaseLive: Evict without force named a record whose lease is
	// live (or, in a [MemoryStore], a [Transactional] attempt that runs, and
	// in a [PostgresStore] a record that a request's transaction holds):
	// an attempt may be running, and nothing was deleted.
	ErrLeaseLive = errors.New("server: the record's lease is live: an attempt may be running")
	// ErrBadScope: the scope named cannot be a record's (an empty route, a
	// key the middleware would refuse); nothing was read or changed.
	ErrBadScope = errors.New("server: bad scope")
)

// RecordStore is the optional interface of a [Store] that an [Operator] reads
// and evicts records through: [PostgresStore], [MemoryStore] and
// idemredis's Store implement it, and a third store may, to be looked at
// through an Operator (the admin page, package admin; idemctl reads a
// PostgresStore's database, or with -redis an idemredis Store's);
// storetest runs its operator areas on any store that implements it. Its
// methods return records as stored, headers included; the Operator is
// what withholds the sensitive ones and checks the scopes, so that the
// rules live in one place whatever the store.
// Implementations must be safe for concurrent use, and none of their
// methods may wait for a record that a request holds longer than a few
// seconds.
type RecordStore interface {
	// ReadRecord returns the record of op's scope (op.Attempt is
	// ignored), with Request, Header and Body only when payload is true,
	// or an error that wraps [ErrUnknownKey] when there is none. An expired
	// record not yet swept is returned ([Record.Expired] tells). ctx governs
	// the call.
	ReadRecord(ctx context.Context, op Operation, payload bool) (Record, error)

	// ListRunning returns at most q.Limit records in state running whose
	// position (CreatedAt, then Tenant, Principal, Route and Key, compared
	// as bytes) is after q.After, in that order, without payload: only
	// those whose lease has ended when q.Stuck, only those of q.Route when
	// it is set. ctx governs the call.
	ListRunning(ctx context.Context, q InFlightQuery) ([]Record, error)

	// DeleteRecord deletes the record of op's scope and returns it as it
	// was. It must delete nothing, and return the record with an error
	// that wraps [ErrLeaseLive], when the record is running under a live
	// lease (or held by an attempt running now) and force is false; the
	// check and the delete must be one atomic step. It returns an error
	// that wraps [ErrUnknownKey] when there is no record. A later write of
	// the attempt that held the record (complete, extend, checkpoint) must
	// fail with [ErrLeaseLost], as after a takeover. ctx governs the call.
	DeleteRecord(ctx context.Context, op Operation, force bool) (Record, error)

	// CountRecords counts the records for a dashboard (see [RecordCounts]).
	// ctx governs the call.
	CountRecords(ctx context.Context) (RecordCounts, error)

	// FindKey returns at most limit records whose key is key, whatever
	// their tenant, principal and route, oldest first, without payload;
	// none is not an error. ctx governs the call.
	FindKey(ctx context.Context, key string, limit int) ([]Record, error)
}

var (
	_ RecordStore = (*PostgresStore)(nil)
	_ RecordStore = (*MemoryStore)(nil)
)

// RecordCounts is what [RecordStore.CountRecords] counts.
type RecordCounts struct {
	// Records is the number of records, swept or not, as RecordsAre says:
	// exact for a [MemoryStore]; for a [PostgresStore], exact up to 10,000
	// and past that the planner's estimate (counting a large table exactly
	// reads all of it), or 10,001 as a lower bound while the table has no
	// estimate yet (before its first ANALYZE).
	Records int64
	// RecordsAre says what Records is. "" means [CountExact].
	RecordsAre CountKind
	// Running counts the records in state running (see [StoreStats]), and
	// Stuck those of them whose lease has ended: abandoned operations
	// waiting for their client's retry or a reconciler.
	Running, Stuck int
	// OldestRunning and OldestStuck are the ages of the oldest of them by
	// the store's clock (since their first claim); 0 when none.
	OldestRunning, OldestStuck time.Duration
}

// CountKind says what a count is: [CountExact], [CountEstimate] or
// [CountAtLeast].
type CountKind string

// The kinds of count.
const (
	// CountExact: the count is exact, at the time it was taken.
	CountExact CountKind = "exact"
	// CountEstimate: the count is an estimate (a database planner's).
	CountEstimate CountKind = "estimate"
	// CountAtLeast: the count is a lower bound; the exact number is not
	// known yet.
	CountAtLeast CountKind = "at least"
)

// Record is an idempotency record as an operator sees it. The payload
// (Request, Header, Body) is set only when it was asked for.
type Record struct {
	// Operation names the record's scope; Attempt is the number of its
	// last attempt (1, or n after n-1 takeovers).
	Operation
	// State is "running" (claimed, no outcome yet), "done" (a response is
	// stored and replayed), "unavailable" (effects committed, response
	// not stored: retries get 500 result-unavailable), "uncertain" (not
	// known at the reconciler's MaxAge: retries get 409 outcome-uncertain
	// until an operator resolves it) or "not-applied" (resolved as not
	// applied: the key is free).
	State string
	// Mode is [Leased] for a record claimed under a lease, else
	// [Transactional].
	Mode Mode
	// Status is the stored response's status, 0 when none is.
	Status int
	// CreatedAt is when the operation was first claimed; ExpiresAt is when
	// its retention ends (a retry after it runs the handler again).
	CreatedAt, ExpiresAt time.Time
	// LeaseEnds is when the lease of a running [Leased] record ends or
	// ended; zero when there is none.
	LeaseEnds time.Time
	// ReconcileAt is when a reconciler looks at the abandoned operation
	// next; zero means as soon as its lease has ended.
	ReconcileAt time.Time
	// Recovery is the last recovery point an attempt recorded, nil when
	// none did.
	Recovery *Recovery
	// FingerprintAlg names the algorithm of the stored request
	// fingerprint ("sha256-v3").
	FingerprintAlg string
	// ReadAt is the store's clock when the record was read (the
	// database's for [PostgresStore]): Age, LeaseLeft, Stuck and Expired are
	// judged at it.
	ReadAt time.Time

	// Request is the request a [Leased] record stored for a reconciler
	// (nil for [Transactional] records), with the payload.
	Request *StoredRequest
	// Header and Body are the stored response's, with the payload. An
	// [Operator] shows only the headers that a replay may send
	// ([OperatorConfig.ReplayHeaders]), never Set-Cookie, authentication or
	// connection headers; Withheld names the stored headers it left out.
	Header   http.Header
	Body     []byte
	Withheld []string

	// Resolved is who resolved an uncertain operation, when and why; nil
	// when no one did.
	Resolved *Resolved
}

// StoredRequest is the request that a [Leased] record keeps for a
// reconciler: method, path and query, the ServeMux pattern, the
// Content-Type, Content-Language and fingerprinted headers, and the body.
type StoredRequest struct {
	Method, URI, Pattern string
	Header               http.Header
	Body                 []byte
}

// Age is the time since the operation was first claimed, at ReadAt.
func (r Record) Age() time.Duration { return r.ReadAt.Sub(r.CreatedAt) }

// LeaseLeft is the time left on the lease of a running record at ReadAt:
// 0 or less when it has ended or there is none.
func (r Record) LeaseLeft() time.Duration {
	if r.LeaseEnds.IsZero() || r.State != string(stateRunning) {
		return 0
	}
	return r.LeaseEnds.Sub(r.ReadAt)
}

// Stuck reports a [Leased] operation whose attempt ended without an
// outcome (its lease ended, its node died or answered a 5xx) and that no
// retry or reconciler has settled yet: the next retry takes it over with
// its recovery point, and a reconciler of its route settles it.
func (r Record) Stuck() bool {
	return r.State == string(stateRunning) && r.Mode == Leased && r.LeaseLeft() <= 0
}

// Expired reports a record past its retention at ReadAt: a retry runs the
// handler again, even before the record is swept. A record whose lease is
// live, or that is uncertain, never counts as expired.
func (r Record) Expired() bool {
	return !r.ReadAt.Before(r.ExpiresAt) && !(r.State == string(stateRunning) && r.LeaseLeft() > 0) &&
		r.State != string(stateUncertain)
}

// InFlightQuery selects a page of the operations in flight (records in
// state running, and the uncertain ones), oldest first.
type InFlightQuery struct {
	// Stuck keeps only the operations whose lease has ended (see
	// [Record.Stuck]).
	Stuck bool
	// Route keeps only the records of this route; "" keeps all.
	Route string
	// After is the position the page starts after: the zero [Position]
	// starts from the oldest, [InFlightPage.Next] continues.
	After Position
	// Limit is the most records a page holds. Zero or negative: 50; at
	// most 1000.
	Limit int
}

// Position is a place in the list of operations in flight: a record's
// CreatedAt and scope. String gives its text form, for a URL or a command
// line, and [ParsePosition] reads it back.
type Position struct {
	CreatedAt                     time.Time
	Tenant, Principal, Route, Key string
}

// InFlightPage is a page of InFlight.
type InFlightPage struct {
	Records []Record
	// Next is the position to pass as [InFlightQuery.After] for the next
	// page; More is false when this page is the last.
	Next Position
	More bool
}

// OperatorConfig configures an [Operator]. Its zero value shows the
// contract's replayed headers and logs to slog.Default().
type OperatorConfig struct {
	// ReplayHeaders are response headers shown besides Content-Type,
	// Content-Language, Location, ETag, Last-Modified and Cache-Control:
	// the routes' [Config.ReplayHeaders]. Set-Cookie, authentication, Date
	// and connection headers are never shown, whatever this says.
	ReplayHeaders []string
	// Logger receives a warning for every eviction, naming the record.
	// Nil: slog.Default().
	Logger *slog.Logger
}

// Operator is the API for the people who run a service: it looks up the
// record of one key, lists the operations in flight (the stuck ones
// marked) and evicts a record. Lookup is the one most callers need: it
// answers "was this key charged?" and "why is this key 409?". idemctl and
// the admin page (package admin) are built on it. An Operator is safe for
// concurrent use.
//
// Evicting a record deletes it: the next request with its key runs the
// handler again, as a first request would. For a done record that means
// the operation may take effect a second time if the client retries; for
// a stuck one, that the retry starts over without the recovery point a
// takeover would have handed it. Evict refuses a record whose lease is
// live unless forced: the attempt may be running, and one that is goes
// on while a retry runs beside it (its completion is then refused).
type Operator struct {
	store  RecordStore
	allow  map[string]bool // response headers shown
	logger *slog.Logger
}

// NewOperator returns an [Operator] over store (a *[PostgresStore] or a
// *[MemoryStore], or a third store that implements [RecordStore]).
func NewOperator(store RecordStore, cfg OperatorConfig) *Operator {
	allow := headerSet(append(slices.Clone(baseReplayHeaders), cfg.ReplayHeaders...))
	for _, name := range neverReplayed {
		delete(allow, http.CanonicalHeaderKey(name))
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Operator{store: store, allow: allow, logger: logger}
}

// Lookup returns the record of op's scope (tenant, principal, route and
// key; op.Attempt is ignored), with its stored request and response when
// payload is true, less the headers no replay sends ([Record.Withheld] names
// them). Errors: [ErrBadScope], [ErrUnknownKey], and the store's. ctx governs
// the call.
func (o *Operator) Lookup(ctx context.Context, op Operation, payload bool) (Record, error) {
	if err := checkScope(op); err != nil {
		return Record{}, err
	}
	rec, err := o.store.ReadRecord(ctx, op, payload)
	if err != nil {
		return Record{}, err
	}
	return o.shown(rec), nil
}

// InFlight returns a page of the operations in flight, oldest first (see
// [InFlightQuery]). ctx governs the call.
func (o *Operator) InFlight(ctx context.Context, q InFlightQuery) (InFlightPage, error) {
	if q.Limit <= 0 {
		q.Limit = 50
	}
	q.Limit = min(q.Limit, 1000)
	limit := q.Limit
	q.Limit++ // one more tells whether a next page exists
	recs, err := o.store.ListRunning(ctx, q)
	if err != nil {
		return InFlightPage{}, err
	}
	page := InFlightPage{Records: recs}
	if len(recs) > limit {
		page.Records, page.More = recs[:limit], true
	}
	if n := len(page.Records); n > 0 {
		page.Next = positionOf(page.Records[n-1])
	}
	for i := range page.Records {
		page.Records[i] = o.shown(page.Records[i])
	}
	return page, nil
}

// Evict deletes the record of op's scope, so that the next request with
// its key runs the handler again (see [Operator]), and returns the record
// as it was. It refuses a record whose lease is live, changing nothing,
// unless force. Errors: [ErrBadScope], [ErrUnknownKey], [ErrLeaseLive] (with the
// time left), and the store's. ctx governs the call.
func (o *Operator) Evict(ctx context.Context, op Operation, force bool) (Record, error) {
	if err := checkScope(op); err != nil {
		return Record{}, err
	}
	rec, err := o.store.DeleteRecord(ctx, op, force)
	if errors.Is(err, ErrLeaseLive) {
		left := ""
		if rec.LeaseLeft() > 0 {
			left = rec.LeaseLeft().Round(time.Millisecond).String() + " left on the lease; "
		}
		return o.shown(rec), fmt.Errorf("%w (%sevict with force to delete it anyway)", err, left)
	}
	if err != nil {
		return Record{}, err
	}
	o.logger.LogAttrs(ctx, slog.LevelWarn, "idem: record evicted: a retry with its key runs the handler again",
		slog.String("tenant", op.Tenant), slog.String("principal", op.Principal), slog.String("route", op.Route),
		slog.String("key", op.Key), slog.String("state", rec.State), slog.Int("attempt", rec.Attempt),
		slog.Bool("stuck", rec.Stuck()), slog.Bool("forced", force))
	return o.shown(rec), nil
}

// maxKeyScopes is the most records [Operator.LookupKey] returns.
const maxKeyScopes = 100

// LookupKey returns the records of key in every scope (tenant, principal
// and route) that holds one, oldest first, at most 100, without payload:
// for an operator who knows the key alone. None is not an error. Errors:
// [ErrBadScope] for a key the middleware refuses, and the store's. ctx
// governs the call.
func (o *Operator) LookupKey(ctx context.Context, key string) ([]Record, error) {
	if err := wire.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("%w: %v (the middleware answers such a key 400 and records nothing)", ErrBadScope, err)
	}
	recs, err := o.store.FindKey(ctx, key, maxKeyScopes)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		recs[i] = o.shown(recs[i])
	}
	return recs, nil
}

// Counts counts the records (see [RecordCounts]). ctx governs the call.
func (o *Operator) Counts(ctx context.Context) (RecordCounts, error) {
	return o.store.CountRecords(ctx)
}

// shown is rec with only the headers an operator may see.
func (o *Operator) shown(rec Record) Record {
	if rec.Header != nil {
		rec.Header, rec.Withheld = keep(rec.Header, func(name string) bool { return o.allow[name] })
	}
	if rec.Request != nil {
		req := *rec.Request
		var withheld []string
		req.Header, withheld = keep(req.Header, func(name string) bool { return !sensitiveRequestHeaders[name] })
		rec.Request = &req
		rec.Withheld = append(rec.Withheld, withheld...)
	}
	return rec
}

// sensitiveRequestHeaders are request headers never shown, should a
// route fingerprint one ([Config.FingerprintHeaders]).
var sensitiveRequestHeaders = headerSet(append(slices.Clone(neverReplayed), "Cookie", "X-Api-Key"))

// keep returns the headers of h that show accepts, by canonical name, and
// the sorted names of the others.
func keep(h http.Header, show func(name string) bool) (http.Header, []string) {
	out := http.Header{}
	var withheld []string
	for name, values := range h {
		canon := http.CanonicalHeaderKey(name)
		if show(canon) {
			out[canon] = append(out[canon], values...)
		} else if !slices.Contains(withheld, canon) {
			withheld = append(withheld, canon)
		}
	}
	slices.Sort(withheld)
	return out, withheld
}

// checkScope refuses a scope that no record can have, by the middleware's
// rules and only those: a request whose route is "" passes through
// without a record, and a key that [wire.ValidateKey] refuses (as
// [wire.ParseKey] does for the middleware) is answered 400. Any tenant
// and principal ([Config.Scope] returns what it likes) and any other route
// ([Config.Route]) can be a record's, whatever their length or
// characters; a store that cannot hold one has no record of it, and says
// [ErrUnknownKey].
func checkScope(op Operation) error {
	if op.Route == "" {
		return fmt.Errorf("%w: the route is empty, and the middleware records no request without one (name it as the middleware does: \"POST /v1/payments\")", ErrBadScope)
	}
	if err := wire.ValidateKey(op.Key); err != nil {
		return fmt.Errorf("%w: %v (the middleware answers such a key 400 and records nothing)", ErrBadScope, err)
	}
	return nil
}
