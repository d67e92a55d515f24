package main

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
