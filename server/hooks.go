package server

import (
	"context"
	"log/slog"
	"time"
)

// Event describes one step of a keyed request, for [Hooks].
type Event struct {
	// Tenant, Principal, Route and Key name the record (its scope).
	Tenant, Principal, Route, Key string
	// RouteIsPath is true when Route is the request's method and raw path,
	// not a pattern: the request had no r.Pattern and [Config.Route] is nil
	// (see Config.Route). Such a route names one path, /v1/payments/p1,
	// so telemetry should not use it as a label: each id would be a series.
	RouteIsPath bool
	// Mode is the mode of the route.
	Mode Mode
	// Attempt is 1 for a first claim and n > 1 for the n-th attempt of a
	// [Leased] operation that took over an expired lease; 0 when the request
	// claimed nothing.
	Attempt int
	// Status is the handler's status (Handled), the status sent to the
	// client (Committed, Replayed, Refused), or 0.
	Status int
	// Problem names the problem document the middleware answered with, if
	// any: key-in-flight, key-reused, result-unavailable, ...
	Problem string
	// Err is the error behind a release, a refusal or a stale completion.
	Err error
	// Elapsed is how long the store took over the step this event
	// reports: the claim, its waits for a running duplicate and for a
	// pool connection included (Claimed, and Replayed or Refused when the
	// claim's verdict was a replay or a refusal); the commit (Committed,
	// and Released or StaleCompletion after a commit that failed); the
	// rollback or release (Released). It is 0 for Handled and for a
	// refusal before any claim (key-missing, key-invalid, a body too
	// large).
	Elapsed time.Duration
	// Waited is true when the claim waited for a running duplicate of the
	// request ([Transactional] mode, see [Config.WaitBound]) before its
	// verdict, whatever the verdict was: for the key's lock, or for a pool
	// connection while an attempt of the key ran on this node. It stays
	// set in the request's later events.
	Waited bool
	// Unavailable is true in Committed when the operation's response was
	// not stored (it was streamed, or outgrew [Config.MaxResponseBytes]):
	// its record answers every retry with 500 result-unavailable.
	Unavailable bool
}

// Hooks observe the steps of a keyed request. Every field is optional. They
// run synchronously on the request's goroutine, so they must be quick; they
// see but never change the outcome, except that a Claimed or Handled hook
// that panics releases the attempt as a panicking handler does. The crash
// tests of this module use Claimed, Handled and Committed to kill a server
// at exact points.
type Hooks struct {
	// Claimed runs after the request claimed its key (in [Transactional] mode
	// with Postgres: inside the open transaction) and before the handler
	// runs. [Event.Attempt] > 1 marks a takeover of an expired lease.
	Claimed func(context.Context, Event)
	// Handled runs after the handler returned (or started streaming) and
	// before its outcome is committed, rolled back or released.
	Handled func(context.Context, Event)
	// Committed runs after the outcome became durable (committed, or
	// completed under the current lease) and before the response is written.
	Committed func(context.Context, Event)
	// Released runs after a 5xx, a panic or a rejection status rolled the
	// attempt back ([Transactional]) or released the key or ended the lease
	// ([Leased]), and after a commit that failed ([Event.Err] says why).
	Released func(context.Context, Event)
	// Replayed runs before a stored response is replayed.
	Replayed func(context.Context, Event)
	// Refused runs before the middleware answers with a problem instead of
	// running the handler: key-missing, key-invalid, key-reused,
	// key-in-flight, result-unavailable, or a store error.
	Refused func(context.Context, Event)
	// StaleCompletion runs when a [Leased] handler finished after another
	// attempt took its key over: its completion was refused.
	StaleCompletion func(context.Context, Event)
}

func call[E Event | ReconcileEvent](f func(context.Context, E), ctx context.Context, e E) {
	if f != nil {
		f(ctx, e)
	}
}

// logAttrs renders an event for slog.
func (e Event) logAttrs() []slog.Attr {
	attrs := []slog.Attr{
		slog.String("tenant", e.Tenant), slog.String("principal", e.Principal),
		slog.String("route", e.Route), slog.String("key", e.Key),
	}
	if e.Attempt > 0 {
		attrs = append(attrs, slog.Int("attempt", e.Attempt))
	}
	if e.Status > 0 {
		attrs = append(attrs, slog.Int("status", e.Status))
	}
	if e.Problem != "" {
		attrs = append(attrs, slog.String("problem", e.Problem))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.Any("err", e.Err))
	}
	return attrs
}

func (s *settings) log(ctx context.Context, level slog.Level, msg string, e Event) {
	if s.Logger.Enabled(ctx, level) {
		s.Logger.LogAttrs(ctx, level, msg, e.logAttrs()...)
	}
}
