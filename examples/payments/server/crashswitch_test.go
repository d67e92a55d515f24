package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// env returns a getenv over vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestCrashSwitchFromEnv(t *testing.T) {
	cases := []struct {
		at, route string
		ok        bool
	}{
		{"committed", "POST /v1/payments", true},
		{"claimed", "", true},
		{"gateway-called", "", true},
		{"gateway-answered", "POST /v1/charges", true},
		{"gateway-called", "POST /v1/payments", false}, // never reached by that route
		{"recorded", "PUT /v1/accounts/{id}", false},
		{"reconciling", "", true},
		{"reconciled", "POST /v1/charges", true},
		{"reconciled", "POST /v1/payments", false}, // the reconciler settles charges alone
		{"paid", "", false},
	}
	for _, c := range cases {
		t.Run(c.at+" "+c.route, func(t *testing.T) {
			s, err := crashSwitchFromEnv(env(map[string]string{envCrashAt: c.at, envCrashRoute: c.route}), slog.New(slog.DiscardHandler))
			if c.ok {
				require.NoError(t, err)
				assert.Equal(t, c.at, s.at)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func TestCrashSwitchAction(t *testing.T) {
	for action, pause := range map[string]bool{"": false, "kill": false, "pause": true} {
		s, err := crashSwitchFromEnv(env(map[string]string{envCrashAt: "recorded", envCrashAction: action}), slog.New(slog.DiscardHandler))
		require.NoError(t, err, action)
		assert.Equal(t, pause, s.resume != nil, action)
	}
	_, err := crashSwitchFromEnv(env(map[string]string{envCrashAt: "recorded", envCrashAction: "stop"}), slog.New(slog.DiscardHandler))
	assert.ErrorContains(t, err, `IDEM_CRASH_ACTION="stop": want kill or pause`)
}

// A crash switch that can never fire stops the program with a usage error
// (exit 2) before it serves anything. The context is cancelled already,
// so that a run that went on to serve would return at once.
func TestRunRefusesASwitchThatCannotFire(t *testing.T) {
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, []string{"-addr", "127.0.0.1:0"}, &stdout, &stderr,
		env(map[string]string{envCrashAt: "gateway-answered", envCrashRoute: "POST /v1/payments"}))
	assert.ErrorIs(t, err, errUsage)
	assert.Contains(t, stderr.String(), `IDEM_CRASH_AT="gateway-answered" with IDEM_CRASH_ROUTE="POST /v1/payments" can never fire`)
	assert.Empty(t, stdout.String(), "nothing listened")
}

// The reconciler's points fire from its hook and after its function
// answered, and from nowhere else.
func TestCrashSwitchInTheReconciler(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	var calls int
	f := func(context.Context, *server.Abandoned) (server.Settlement, error) {
		calls++
		return server.Settlement{Answer: server.NotHappened}, nil
	}
	for _, at := range []string{"reconciling", "reconciled", "recorded"} {
		s, err := crashSwitchFromEnv(env(map[string]string{envCrashAt: at}), quiet)
		require.NoError(t, err)
		s.after = 2 // counted, not fired
		_, _ = s.reconcileFunc(f)(context.Background(), &server.Abandoned{Operation: server.Operation{Route: chargesRoute}})
		if h := s.reconcileHooks().TakenOver; h != nil {
			h(context.Background(), server.ReconcileEvent{Operation: server.Operation{Route: chargesRoute}})
		}
		want := map[string]int64{"reconciling": 1, "reconciled": 1}[at]
		assert.Equal(t, want, s.seen.Load(), "%s: times reached", at)
	}
	assert.Equal(t, 3, calls, "the wrapped function ran each time")
	var none *crashSwitch
	assert.Nil(t, none.reconcileHooks().TakenOver)
	assert.NotNil(t, none.reconcileFunc(f))
}

func TestReconcileFlags(t *testing.T) {
	cases := []struct {
		args []string
		ok   bool
	}{
		{[]string{"-reconcile", "10s"}, true},
		{[]string{"-reconcile", "1s", "-reconcile-max-age", "2s"}, true},
		{[]string{"-reconcile", "-1s"}, false},
		{[]string{"-reconcile", "1s", "-reconcile-max-age", "24h"}, false}, // not under -retention
		{[]string{"-reconcile", "1s", "-reconcile-max-age", "2h", "-retention", "3h"}, true},
		{[]string{"-reconcile-max-age", "48h"}, true}, // no reconciler: unused
	}
	for _, c := range cases {
		_, err := parseFlags(c.args, io.Discard, noEnv)
		if c.ok {
			assert.NoError(t, err, "%q", c.args)
		} else {
			assert.ErrorIs(t, err, errUsage, "%q", c.args)
		}
	}
	o, err := parseFlags([]string{"-reconcile", "10s"}, io.Discard, noEnv)
	require.NoError(t, err)
	assert.Equal(t, time.Hour, o.reconcileMaxAge, "-reconcile-max-age defaults to the reconciler's MaxAge default")
}
