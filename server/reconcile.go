package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"
)

// Abandoned is a [Leased] operation whose last attempt ended without an
// outcome (its node died, stalled past its lease, or answered a 5xx) and
// whose client has not come back, as [RunReconciler] hands it to a
// [ReconcileFunc]. The reconciler has taken the operation over, exactly as a
// retry would: [Operation.Attempt] is its attempt number, and the attempt
// that was abandoned can no longer complete.
type Abandoned struct {
	// Operation names the operation; Attempt is the reconciler's.
	Operation
	// Request is the request as the handler saw it: method, URL path and
	// query, Pattern, path values (PathValue), the Content-Type and
	// Content-Language headers and [Config.FingerprintHeaders] (never
	// credentials or cookies), and the body. Its context is the
	// [ReconcileFunc]'s.
	Request *http.Request
	// Recovery is the last recovery point an attempt recorded (Point ""
	// when none did): how far the operation may have got.
	Recovery Recovery
	// Age is the time since the operation was first claimed, by the
	// store's clock.
	Age time.Duration
}

// Answer is what a [ReconcileFunc] found out about an abandoned operation.
type Answer int

const (
	// NotKnown, the zero [Answer]: the effect cannot be told yet (the
	// provider is down, or has not settled it). The operation is looked at
	// again after a backoff; a client retry meanwhile takes it over as
	// usual. After [ReconcileConfig.MaxAge] it becomes uncertain, for an
	// operator to resolve ([Operator.Resolve]).
	NotKnown Answer = iota
	// Completed: the effect happened; [Settlement]'s Status, Header and Body
	// are the response the operation would have returned. It is stored,
	// and every later retry replays it, as if the handler had finished.
	Completed
	// NotHappened: the effect certainly did not happen. The record is
	// deleted, so that a later retry executes the operation afresh.
	NotHappened
)

// String names the answer as events and logs show it.
func (a Answer) String() string {
	switch a {
	case Completed:
		return "completed"
	case NotHappened:
		return "not-happened"
	default:
		return "not-known"
	}
}

// Settlement is a [ReconcileFunc]'s answer. The zero Settlement is [NotKnown].
type Settlement struct {
	Answer Answer
	// Status, Header and Body are the response of a [Completed] operation.
	// Status must be an outcome the middleware stores (not a 5xx, not 1xx).
	// Header is stored as the handler's would be, except Set-Cookie,
	// authentication, Date and connection headers; a replay sends the
	// route's ReplayHeaders of it.
	Status int
	Header http.Header
	Body   []byte
}

// ReconcileFunc looks up, downstream, what became of an abandoned
// operation (for a card charge: the gateway's "get charge by idempotency
// key"), makes the local effects of a completed one that the abandoned
// attempt had not made, and answers. ctx is bounded by the reconciler's
// lease on the operation and is cancelled when the reconciler stops; a
// function should return soon after: the reconciler waits for it only
// [ReconcileConfig.Grace] more, then goes on without it. It
// must be idempotent, as a handler that takes an operation over must: a
// reconciler that dies while it runs leaves the operation to another one,
// which calls it again. It should not perform the operation's effect on
// behalf of a client that left: a charge that did not happen is reported
// [NotHappened], not made. An error counts as [NotKnown] and is logged.
type ReconcileFunc func(ctx context.Context, op *Abandoned) (Settlement, error)

// ReconcileEvent describes one step of a reconciliation, for
// [ReconcileHooks].
type ReconcileEvent struct {
	Operation
	// Answer is the [ReconcileFunc]'s answer (Settled), or [NotKnown].
	Answer Answer
	// Status is the stored status of a [Completed] operation, or 0.
	Status int
	// Err is the error behind a [NotKnown] answer, or a settlement that
	// could not be stored ([ErrLeaseLost] when another attempt took the
	// operation over meanwhile).
	Err error
}

// ReconcileHooks observe a reconciler. Every field is optional; they run
// on the reconciler's goroutines and must be quick.
type ReconcileHooks struct {
	// TakenOver runs after the reconciler took an abandoned operation over,
	// before its [ReconcileFunc] runs.
	TakenOver func(context.Context, ReconcileEvent)
	// Settled runs after an answer was stored: [Completed] (the response is
	// stored), [NotHappened] (the record is deleted) or [NotKnown] (looked at
	// again later); Err says when it could not be.
	Settled func(context.Context, ReconcileEvent)
	// Parked runs after an operation still [NotKnown] at MaxAge was left
	// uncertain: a retry gets 409 outcome-uncertain, the operation never
	// runs again, and an operator must resolve it ([Operator.Resolve]). A
	// store without [UncertainSettler] settles it as result-unavailable
	// instead.
	Parked func(context.Context, ReconcileEvent)
}

// Defaults of [ReconcileConfig], as its fields' docs state them.
const (
	defaultReconcileInterval   = 10 * time.Second
	defaultReconcileMaxAge     = time.Hour
	defaultReconcileMaxBackoff = 5 * time.Minute
)

// ReconcileConfig configures [RunReconciler]. Routes is required; every
// other zero field means its default.
type ReconcileConfig struct {
	// Routes maps each [Leased] route the reconciler settles, named as the
	// middleware names it ("POST /v1/charges", see [Config.Route]), to the
	// function that looks its operations up. Operations of other routes are
	// left alone. It must not be empty.
	Routes map[string]ReconcileFunc

	// Interval is the time between passes; an operation is reconciled
	// within its lease plus one Interval of being abandoned. Zero or
	// negative: 10 s.
	Interval time.Duration

	// Lease is the reconciler's lease on an operation while its function
	// runs; a retry meanwhile gets 409 key-in-flight. Zero or negative:
	// 30 s, as [Config.Lease].
	Lease time.Duration

	// Grace is how long a pass waits for a [ReconcileFunc] past its lease,
	// and [RunReconciler] for the functions still running once its ctx is
	// done, before it goes on without them. A function that ignores its
	// context keeps running; its answer, when it comes, is stored only if
	// the operation is still the reconciler's (fenced, as every
	// settlement is), and the operation is otherwise looked at again as a
	// [NotKnown] one. Zero or negative: 2 s.
	Grace time.Duration

	// MaxAge is how long after its first claim an operation may stay
	// [NotKnown] before it becomes uncertain (see [ReconcileHooks.Parked]). Keep it well
	// under the routes' Retention: a record swept before it is settled
	// takes its evidence with it. Zero or negative: one hour.
	MaxAge time.Duration

	// MaxBackoff caps the wait before a [NotKnown] operation is looked at
	// again; the wait doubles from Interval with each attempt of the
	// operation. Zero or negative: five minutes.
	MaxBackoff time.Duration

	// Batch is how many operations the reconciler takes over at once, and
	// runs the functions of concurrently. Zero or negative: 16.
	Batch int

	// MaxResponseBytes caps a [Completed] response's body; a larger one is
	// refused as an error ([NotKnown]). Zero or negative: 1 MiB, as
	// [Config.MaxResponseBytes].
	MaxResponseBytes int

	// Logger receives a record for each takeover, settlement and error.
	// Nil: slog.Default().
	Logger *slog.Logger

	// Hooks observe the reconciler's steps.
	Hooks ReconcileHooks
}

// errNoRoutes is returned by [RunReconciler] for a config without routes.
var errNoRoutes = errors.New("server: ReconcileConfig.Routes is empty: name the Leased routes to reconcile")

// RunReconciler settles the abandoned operations of cfg.Routes in store,
// at once and then every cfg.Interval, until ctx is done; it returns ctx's
// error, or an error at once for a config it cannot run. An operation is
// abandoned when it is running in [Leased] mode, its lease has ended and no
// retry has taken it over. The reconciler takes it over as a retry would
// (a new fencing token and attempt number, so the completion of the
// attempt that stalled is refused), calls the route's [ReconcileFunc], and
// stores its answer under that token. Run it in a goroutine of one or
// more nodes: several reconcilers take disjoint operations, and one that
// dies mid-settlement leaves its operations to the others once its lease
// ends. When ctx is done it stops taking operations over, cancels the
// functions that run, stores what they answered (an operation they could
// not settle is left due at once, for another reconciler), and returns,
// within cfg.Grace (see [ReconcileConfig.Grace] for a function that ignores
// its context).
func RunReconciler(ctx context.Context, store Store, cfg ReconcileConfig) error {
	rc, err := newReconciler(store, cfg)
	if err != nil {
		return err
	}
	ticker := time.NewTicker(rc.cfg.Interval)
	defer ticker.Stop()
	for {
		if _, err := rc.pass(ctx); err != nil && ctx.Err() == nil {
			rc.cfg.Logger.LogAttrs(ctx, slog.LevelError, "idem: reconcile pass failed", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// reconciler is a resolved [ReconcileConfig] over a store.
type reconciler struct {
	store  Store
	cfg    ReconcileConfig
	routes []string
	rand   func() float64 // the backoff's jitter; tests inject it
}

func newReconciler(store Store, cfg ReconcileConfig) (*reconciler, error) {
	if len(cfg.Routes) == 0 {
		return nil, errNoRoutes
	}
	rc := &reconciler{store: store, cfg: cfg, rand: rand.Float64}
	for route, f := range cfg.Routes {
		if f == nil {
			return nil, fmt.Errorf("server: ReconcileConfig.Routes[%q] is nil", route)
		}
		rc.routes = append(rc.routes, route)
	}
	rc.cfg.Interval = orDefault(cfg.Interval, defaultReconcileInterval)
	rc.cfg.Lease = orDefault(cfg.Lease, defaultLease)
	rc.cfg.Grace = orDefault(cfg.Grace, 2*time.Second)
	rc.cfg.MaxAge = orDefault(cfg.MaxAge, defaultReconcileMaxAge)
	rc.cfg.MaxBackoff = orDefault(cfg.MaxBackoff, defaultReconcileMaxBackoff)
	rc.cfg.Batch = orDefault(cfg.Batch, 16)
	rc.cfg.MaxResponseBytes = orDefault(cfg.MaxResponseBytes, defaultMaxResponseBytes)
	if rc.cfg.Logger == nil {
		rc.cfg.Logger = slog.Default()
	}
	return rc, nil
}

// backoff is the wait before a [NotKnown] operation whose attempt number is
// n is looked at again: Interval doubled per attempt after the second, up
// to MaxBackoff, with equal jitter (half fixed, half random), so that a
// provider that stays down is not polled in lockstep.
func (rc *reconciler) backoff(n int) time.Duration {
	d := rc.cfg.Interval
	for i := 2; i < n && d < rc.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, rc.cfg.MaxBackoff)
	return d/2 + time.Duration(rc.rand()*float64(d/2))
}
