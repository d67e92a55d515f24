package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// An operation whose outcome a reconciler still cannot tell at
// [ReconcileConfig.MaxAge] becomes uncertain (docs/CONTRACT.md §6): it is
// kept, whatever its retention, and its retries get 409 outcome-uncertain,
// until a person resolves it through an [Operator]: applied, with the
// response every later retry replays, or not applied, which frees the key.
// A store offers this by implementing two optional interfaces,
// [UncertainSettler] on the [Settler] of a [Taken] operation and [Resolver]
// on the store; package storetest checks both when a store has them.

// UncertainSettler is the optional interface of a [Settler] that can leave
// an operation uncertain. A store whose settlers lack it gets the older
// behaviour: the reconciler settles the operation as result-unavailable.
type UncertainSettler interface {
	Settler
	// Uncertain marks the operation uncertain, under the settler's token
	// ([ErrLeaseLost] and no change when it is stale). From then on, until
	// a [Resolver] resolves it, the store must answer every claim of the
	// scope whose digest matches with [VerdictUncertain], must never treat
	// the record as expired, sweep it, reclaim it, take it over or hand it
	// to a reconciler, and must keep its recovery point and request. ctx
	// governs the call.
	Uncertain(ctx context.Context) error
}

// Resolver is the optional interface of a store whose uncertain operations
// an operator resolves ([Operator.Resolve]); [PostgresStore] and
// [MemoryStore] implement it.
type Resolver interface {
	// Resolve settles the uncertain record of op's scope (op.Attempt is
	// ignored) by r, which the caller checked ([Resolution]), and returns
	// the record as resolved. Applied: the record becomes completed with
	// r.Response, which every later claim replays, and answers retries at
	// least r.Retention from now. Not applied: the key is freed, the next
	// claim runs the handler afresh. Either way the record keeps who
	// resolved it, when (the store's clock) and why ([Record.Resolved])
	// until it is reclaimed or swept. The check that the record is
	// uncertain and the write must be one atomic step; a record in any
	// other state must be left as it is, and returned with an error that
	// wraps [ErrNotUncertain]. No record: an error that wraps
	// [ErrUnknownKey]. ctx governs the call.
	Resolve(ctx context.Context, op Operation, r Resolution) (Record, error)
}

// ErrNotUncertain: a resolution named a record that is not uncertain (it
// runs, completed, or was resolved already); nothing was changed.
var ErrNotUncertain = errors.New("server: the operation is not uncertain: only an uncertain operation can be resolved")

// ErrNoResolver: the store of an [Operator] cannot hold uncertain
// operations (it does not implement [Resolver]).
var ErrNoResolver = errors.New("server: this store cannot resolve uncertain operations")

// Resolution is a person's answer about an uncertain operation.
type Resolution struct {
	// Applied says the operation took effect. Response is then what
	// every later retry replays: required, with a status from 200 to 499.
	Applied  bool
	Response *Response
	// By names who resolved it and Reason says why (a ticket, the
	// gateway's record): both required, kept with the record and logged.
	By, Reason string
	// Retention is how long from now an applied record answers retries
	// at least. Zero or negative: 24 h, as [Config.Retention].
	Retention time.Duration
}

// Resolved is what a record keeps of the resolution that settled it.
type Resolved struct {
	By, Reason string
	At         time.Time // the store's clock
	Applied    bool
}

// check refuses a resolution that is incomplete.
func (r *Resolution) check() error {
	switch {
	case strings.TrimSpace(r.By) == "" || strings.TrimSpace(r.Reason) == "":
		return errors.New("server: a resolution must say who resolved it and why")
	case r.Applied && r.Response == nil:
		return errors.New("server: an applied resolution needs the response every later retry replays")
	case r.Applied && (r.Response.Status < 200 || r.Response.Status > 499):
		return fmt.Errorf("server: an applied resolution's status is %d: want the operation's own outcome, 200 to 499",
			r.Response.Status)
	case !r.Applied && r.Response != nil:
		return errors.New("server: a resolution that the operation was not applied stores no response")
	}
	if r.Retention <= 0 {
		r.Retention = defaultRetention
	}
	if r.Response != nil {
		res := *r.Response
		res.Unavailable = false
		r.Response = &res
	}
	return nil
}

// Resolve settles the uncertain operation of op's scope (see [Resolver]):
// applied, with the response every later retry replays, or not applied,
// which frees the key. It refuses, changing nothing, a record that is not
// uncertain. The resolution is kept with the record and logged as a
// warning. Errors: [ErrBadScope], [ErrNoResolver], [ErrUnknownKey],
// [ErrNotUncertain], an incomplete resolution's, and the store's. ctx
// governs the call.
func (o *Operator) Resolve(ctx context.Context, op Operation, r Resolution) (Record, error) {
	if err := checkScope(op); err != nil {
		return Record{}, err
	}
	rs, ok := o.store.(Resolver)
	if !ok {
		return Record{}, ErrNoResolver
	}
	if err := r.check(); err != nil {
		return Record{}, err
	}
	rec, err := rs.Resolve(ctx, op, r)
	if err != nil {
		if errors.Is(err, ErrNotUncertain) {
			return o.shown(rec), err
		}
		return Record{}, err
	}
	o.logger.LogAttrs(ctx, slog.LevelWarn, "idem: uncertain operation resolved",
		slog.String("tenant", op.Tenant), slog.String("principal", op.Principal), slog.String("route", op.Route),
		slog.String("key", op.Key), slog.Bool("applied", r.Applied), slog.Int("status", rec.Status),
		slog.String("by", r.By), slog.String("reason", r.Reason))
	return o.shown(rec), nil
}
