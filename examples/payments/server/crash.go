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

// chargesRoute is the route whose handler reports the api steps.
const chargesRoute = "POST /v1/charges"

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
	case "claimed", "handled", "committed", api.StepGatewayCalled, api.StepGatewayAnswered, api.StepRecorded:
	default:
		return nil, fmt.Errorf("%s=%q: want claimed, handled, committed, %s, %s or %s", envCrashAt, at,
			api.StepGatewayCalled, api.StepGatewayAnswered, api.StepRecorded)
	}
	c := &crashSwitch{at: at, route: getenv(envCrashRoute), after: 1, log: log}
	if apiStep(at) && c.route != "" && c.route != chargesRoute {
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

// apiStep reports whether at is a step of POST /v1/charges (see
// api.Config.OnStep) rather than a middleware hook.
func apiStep(at string) bool {
	return at == api.StepGatewayCalled || at == api.StepGatewayAnswered || at == api.StepRecorded
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

// reached counts a request of route at the switch's point, and kills the
// process, or pauses the request until SIGUSR1, when it is the one.
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
