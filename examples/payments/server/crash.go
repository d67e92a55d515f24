package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/server"
)

// The environment variables of the crash switch (see the package doc).
const (
	envCrashAt     = "IDEM_CRASH_AT"
	envCrashRoute  = "IDEM_CRASH_ROUTE"
	envCrashAfter  = "IDEM_CRASH_AFTER"
	envCrashAction = "IDEM_CRASH_ACTION"
)

// chargesRoute is the route whose handler reports the api steps, and the
// only route the reconciler settles.
const chargesRoute = "POST /v1/charges"

// The crash switch's points in the reconciler (see the package doc).
const (
	// atReconciling: the reconciler took an abandoned operation over
	// (server.ReconcileHooks.TakenOver), before it looks it up.
	atReconciling = "reconciling"
	// atReconciled: the reconcile function answered (a charge it found is
	// recorded), before the reconciler stores the settlement.
	atReconciled = "reconciled"
)

// crashSwitch kills the process with SIGKILL when a request reaches a
// point, for crash tests, or pauses that request there until the process
// gets SIGUSR1 (the rest of the process goes on). A nil *crashSwitch never
// fires.
type crashSwitch struct {
	at     string           // a server hook or an api step
	route  string           // "" matches every route
	after  int64            // fire the after-th time the point is reached
	resume <-chan os.Signal // pause: SIGUSR1 arrives here; nil: kill
	seen   atomic.Int64
	log    *slog.Logger
}

// crashSwitchFromEnv reads the switch from the environment; nil when
// IDEM_CRASH_AT is unset.
func crashSwitchFromEnv(getenv func(string) string, log *slog.Logger) (*crashSwitch, error) {
	at := getenv(envCrashAt)
	if at == "" {
		return nil, nil
	}
	switch at {
	case "claimed", "handled", "committed", api.StepGatewayCalled, api.StepGatewayAnswered, api.StepRecorded,
		atReconciling, atReconciled:
	default:
		return nil, fmt.Errorf("%s=%q: want claimed, handled, committed, %s, %s, %s, %s or %s", envCrashAt, at,
			api.StepGatewayCalled, api.StepGatewayAnswered, api.StepRecorded, atReconciling, atReconciled)
	}
	c := &crashSwitch{at: at, route: getenv(envCrashRoute), after: 1, log: log}
	if chargesOnly(at) && c.route != "" && c.route != chargesRoute {
		return nil, fmt.Errorf("%s=%q with %s=%q can never fire: the %s step is reached only by %q",
			envCrashAt, at, envCrashRoute, c.route, at, chargesRoute)
	}
	if s := getenv(envCrashAfter); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s=%q: want a count from 1", envCrashAfter, s)
		}
		c.after = n
	}
	switch action := getenv(envCrashAction); action {
	case "", "kill":
		log.Warn("crash switch armed: this process will SIGKILL itself", "at", at, "route", c.route, "after", c.after)
	case "pause":
		resume, err := notifyResume() // now, so that an early SIGUSR1 cannot kill the process
		if err != nil {
			return nil, fmt.Errorf("%s=pause: %w", envCrashAction, err)
		}
		c.resume = resume
		log.Warn("crash switch armed: a request will wait for SIGUSR1", "at", at, "route", c.route, "after", c.after)
	default:
		return nil, fmt.Errorf("%s=%q: want kill or pause", envCrashAction, action)
	}
	return c, nil
}

// chargesOnly reports whether at is reached by POST /v1/charges alone: a
// step of its handler (see api.Config.OnStep) or of the reconciler, rather
// than a middleware hook.
func chargesOnly(at string) bool {
	switch at {
	case api.StepGatewayCalled, api.StepGatewayAnswered, api.StepRecorded, atReconciling, atReconciled:
		return true
	}
	return false
}

// hooks returns the middleware hook that fires at a "claimed", "handled"
// or "committed" switch.
func (c *crashSwitch) hooks() server.Hooks {
	var h server.Hooks
	if c == nil {
		return h
	}
	hook := func(_ context.Context, e server.Event) { c.reached(e.Route) }
	switch c.at {
	case "claimed":
		h.Claimed = hook
	case "handled":
		h.Handled = hook
	case "committed":
		h.Committed = hook
	}
	return h
}

// onStep is the api.Config.OnStep that fires at a step of POST /v1/charges.
func (c *crashSwitch) onStep(_ context.Context, step string) {
	if c != nil && step == c.at {
		c.reached(chargesRoute)
	}
}

// reconcileHooks returns the reconciler hook that fires at a
// "reconciling" switch.
func (c *crashSwitch) reconcileHooks() server.ReconcileHooks {
	var h server.ReconcileHooks
	if c != nil && c.at == atReconciling {
		h.TakenOver = func(_ context.Context, e server.ReconcileEvent) { c.reached(e.Route) }
	}
	return h
}

// reconcileFunc wraps f so that a "reconciled" switch fires after f
// answered, before the reconciler stores the answer.
func (c *crashSwitch) reconcileFunc(f server.ReconcileFunc) server.ReconcileFunc {
	if c == nil || c.at != atReconciled {
		return f
	}
	return func(ctx context.Context, op *server.Abandoned) (server.Settlement, error) {
		st, err := f(ctx, op)
		c.reached(op.Route)
		return st, err
	}
}

// reached counts a request (or a reconciliation) of route at the switch's
// point, and kills the process, or pauses it there until SIGUSR1, when it
// is the one.
func (c *crashSwitch) reached(route string) {
	if c.route != "" && route != c.route {
		return
	}
	if c.seen.Add(1) != c.after {
		return
	}
	if c.resume != nil {
		c.log.Warn("crash switch: paused until SIGUSR1", "at", c.at, "route", route)
		<-c.resume
		c.log.Warn("crash switch: resumed", "at", c.at, "route", route)
		return
	}
	c.log.Warn("crash switch: SIGKILL", "at", c.at, "route", route)
	self, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = self.Kill() // SIGKILL on Unix: no deferred function, no flush, no goodbye
	}
	if err != nil {
		c.log.Error("crash switch: cannot kill the process", "err", err)
		os.Exit(137)
	}
	select {} // the signal is on its way: this request goes no further
}
