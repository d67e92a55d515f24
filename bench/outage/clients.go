package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/idemkit/idem"
)

// client is one client under test: do sends the payment of operation op
// and returns "" when it was made (a 201), or why not.
type client struct {
	name string
	new  func(base *http.Transport) func(ctx context.Context, url string, op int) string
}

func clients() []client {
	return []client{
		{"idem", func(base *http.Transport) func(context.Context, string, int) string {
			c := idem.NewClient(idem.Config{Base: base})
			return func(ctx context.Context, url string, op int) string {
				return pay(c, idem.WithKey(ctx, key(op)), url, op)
			}
		}},
		// The budget alone, its denials waiting for a token (the default)
		// or failing at once: what the budget's waiting is worth.
		{"idem, no breaker", func(base *http.Transport) func(context.Context, string, int) string {
			c := idem.NewClient(idem.Config{Base: base, Breaker: idem.BreakerConfig{Disabled: true}})
			return func(ctx context.Context, url string, op int) string {
				return pay(c, idem.WithKey(ctx, key(op)), url, op)
			}
		}},
		{"idem, no breaker, fail-fast", func(base *http.Transport) func(context.Context, string, int) string {
			c := idem.NewClient(idem.Config{Base: base, Breaker: idem.BreakerConfig{Disabled: true}, FailFast: true})
			return func(ctx context.Context, url string, op int) string {
				return pay(c, idem.WithKey(ctx, key(op)), url, op)
			}
		}},
		// With the adaptive concurrency limit per host (issue 47, opt-in).
		{"idem, concurrency limit", func(base *http.Transport) func(context.Context, string, int) string {
			c := idem.NewClient(idem.Config{Base: base, ConcurrencyLimit: true})
			return func(ctx context.Context, url string, op int) string {
				return pay(c, idem.WithKey(ctx, key(op)), url, op)
			}
		}},
		{"go-retryablehttp", func(base *http.Transport) func(context.Context, string, int) string {
			rc := retryablehttp.NewClient() // its defaults: 4 retries, 1 s to 30 s, Retry-After honoured
			rc.HTTPClient.Transport = base
			rc.Logger = nil
			c := rc.StandardClient()
			return func(ctx context.Context, url string, op int) string { return pay(c, ctx, url, op) }
		}},
		{"failsafe-go retry", func(base *http.Transport) func(context.Context, string, int) string {
			c := &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().Build())}
			return func(ctx context.Context, url string, op int) string { return pay(c, ctx, url, op) }
		}},
		// failsafe-go's AdaptiveLimiter (Netflix concurrency-limits' idea)
		// with its defaults, inside its retries (issue 47).
		{"failsafe-go retry+adaptive limiter", func(base *http.Transport) func(context.Context, string, int) string {
			policies := []failsafe.Policy[*http.Response]{failsafehttp.NewRetryPolicyBuilder().Build(),
				adaptivelimiter.NewWithDefaults[*http.Response]()}
			c := &http.Client{Transport: failsafehttp.NewRoundTripper(base, policies...)}
			return func(ctx context.Context, url string, op int) string { return pay(c, ctx, url, op) }
		}},
		{"failsafe-go retry+breaker", func(base *http.Transport) func(context.Context, string, int) string {
			cb := circuitbreaker.NewBuilder[*http.Response]().
				HandleIf(func(resp *http.Response, err error) bool { return err != nil || resp.StatusCode >= 500 }).
				WithFailureThresholdRatio(5, 10).WithDelay(5 * time.Second).WithSuccessThreshold(3).Build()
			policies := []failsafe.Policy[*http.Response]{failsafehttp.NewRetryPolicyBuilder().Build(), cb}
			c := &http.Client{Transport: failsafehttp.NewRoundTripper(base, policies...)}
			return func(ctx context.Context, url string, op int) string { return pay(c, ctx, url, op) }
		}},
	}
}

func key(op int) string { return keyPrefix + strconv.Itoa(op) }

// pay sends one keyed POST through c and names its outcome.
func pay(c *http.Client, ctx context.Context, url string, op int) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"amount_cents":100}`))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Idempotency-Key", key(op)) // idem's WithKey sets the same; the others send it as given
	resp, err := c.Do(req)
	if err != nil {
		return reason(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Sprintf("status %d", resp.StatusCode)
	}
	return ""
}

// reason names why a call failed: idem's sentinel, a deadline, or the
// error's own text for the other clients.
func reason(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{idem.ErrCircuitOpen, "circuit open"},
		{idem.ErrBudgetExhausted, "budget exhausted"},
		{idem.ErrAttemptsExhausted, "attempts exhausted"},
		{idem.ErrDeadline, "deadline (a wait past it)"},
		{idem.ErrRateLimited, "quota had no room"},
		{idem.ErrOverloaded, "overloaded (no slot)"},
		{circuitbreaker.ErrOpen, "circuit open"},
		{adaptivelimiter.ErrExceeded, "limit exceeded"},
		{context.DeadlineExceeded, "deadline"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	if s := err.Error(); strings.Contains(s, "giving up after") {
		return "retries exhausted"
	}
	return "other"
}
