package idem

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A context without options changes nothing; each option keeps the others.
func TestOptionsCompose(t *testing.T) {
	ctx := context.Background()
	assert.Equal(t, callOptions{}, optionsOf(ctx))
	assert.Equal(t, ctx, WithMaxAttempts(ctx, 0), "WithMaxAttempts(0) changes nothing")
	assert.Equal(t, ctx, WithMaxAttempts(ctx, -3))

	ctx = WithHedging(WithCritical(WithoutRetry(WithKey(ctx, "k"))))
	o := optionsOf(ctx)
	assert.Equal(t, "k", o.key)
	assert.True(t, o.named && o.critical && o.hedge)
	assert.Equal(t, 1, o.maxAttempts)
	o = optionsOf(WithoutKey(WithMaxAttempts(ctx, 7)))
	assert.True(t, o.optOut)
	assert.False(t, o.named, "WithoutKey replaces WithKey")
	assert.Equal(t, 7, o.maxAttempts)
	assert.True(t, o.critical)
}

// WithMaxAttempts and WithoutRetry bound the attempts of one call, in place
// of Config.MaxAttempts.
func TestWithMaxAttempts(t *testing.T) {
	for _, tt := range []struct {
		name  string
		ctx   context.Context
		calls int
	}{
		{"config", context.Background(), DefaultMaxAttempts},
		{"fewer", WithMaxAttempts(context.Background(), 2), 2},
		{"more", WithMaxAttempts(context.Background(), 8), 8},
		{"no retry", WithoutRetry(context.Background()), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			tr, _ := newTestTransport(t, Config{Base: statusBase(&calls, "", nil, 503), NoBudget: true,
				Breaker: BreakerConfig{Disabled: true}})
			resp, err := tr.RoundTrip(post(t, tt.ctx, "http://api.test/", `{}`))
			if err == nil {
				discard(resp)
			}
			assert.Equal(t, tt.calls, calls)
		})
	}
}

// A critical call's retries are never denied by the budget, and still
// spend its tokens; other calls' are denied (fail-fast here, so that the
// denial ends the call at once).
func TestWithCritical(t *testing.T) {
	budget := NewBudget(BudgetConfig{FloorRate: -1}) // no floor, and a 503 earns nothing
	calls := 0
	tr, _ := newTestTransport(t, Config{Base: statusBase(&calls, "", nil, 503), Budget: budget,
		FailFast: true, Breaker: BreakerConfig{Disabled: true}})

	_, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/", `{}`))
	require.ErrorIs(t, err, ErrBudgetExhausted)
	assert.Equal(t, 1, calls)

	calls = 0
	_, err = tr.RoundTrip(post(t, WithCritical(context.Background()), "http://api.test/", `{}`))
	assert.ErrorIs(t, err, ErrAttemptsExhausted)
	assert.Equal(t, DefaultMaxAttempts, calls, "a critical call makes every attempt")
	stats := budget.Stats()
	assert.EqualValues(t, DefaultMaxAttempts-1, stats.Retries, "the critical retries are counted")
	assert.EqualValues(t, 1, stats.Denied)
}
