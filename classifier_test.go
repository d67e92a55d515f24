package idem

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statusBase answers each call with the next of statuses (the last one
// again when they run out), with body and header, counting its calls.
func statusBase(calls *int, body string, header http.Header, statuses ...int) roundTripFunc {
	return func(r *http.Request) (*http.Response, error) {
		status := statuses[min(*calls, len(statuses)-1)]
		*calls++
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
		h := header.Clone()
		if h == nil {
			h = http.Header{}
		}
		return &http.Response{StatusCode: status, Header: h, Request: r,
			ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}, nil
	}
}

// A Classifier's verdicts (issue 18): Retry with its wait, InFlight, Stop
// and Fail override the default; Defer leaves it.
func TestClassifierVerdicts(t *testing.T) {
	errMine := errors.New("my API said no")
	tests := []struct {
		name     string
		decision Decision
		statuses []int
		calls    int
		wantErr  error // nil: a response with the last status
		waits    []time.Duration
	}{
		{"Retry a 409 with a wait", Decision{Verdict: Retry, Wait: 7 * time.Second}, []int{409, 201}, 2, nil, []time.Duration{7 * time.Second}},
		{"Retry with the default wait", Decision{Verdict: Retry}, []int{409, 201}, 2, nil, []time.Duration{50 * time.Millisecond}},
		{"InFlight until exhausted", Decision{Verdict: InFlight}, []int{409}, 3, ErrKeyInFlight, nil},
		{"Stop a 503", Decision{Verdict: Stop}, []int{503, 201}, 1, nil, nil},
		{"Fail a 200", Decision{Verdict: Fail, Err: errMine}, []int{200}, 1, errMine, nil},
		{"Defer", Decision{}, []int{503, 201}, 2, nil, []time.Duration{50 * time.Millisecond}},
		{"an unknown verdict defers", Decision{Verdict: 42}, []int{503, 201}, 2, nil, []time.Duration{50 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			d := tt.decision
			cl := func(o Outcome) Decision {
				if o.Status == tt.statuses[0] {
					return d
				}
				return Decision{}
			}
			tr, clk := newTestTransport(t, Config{Base: statusBase(&calls, "{}", nil, tt.statuses...), MaxAttempts: 3,
				NoBudget: true, Classifier: cl})
			resp, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/", `{}`))
			assert.Equal(t, tt.calls, calls, "calls")
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.statuses[tt.calls-1], resp.StatusCode)
				discard(resp)
			}
			if tt.waits != nil {
				assert.Equal(t, tt.waits, clk.Waits()[:len(tt.waits)])
			}
		})
	}
}

// InFlight makes the outcome unknown (the operation may be running), as a
// 409 key-in-flight does, and a Fail keeps the call's certainty.
func TestClassifierInFlightMayHaveActed(t *testing.T) {
	calls := 0
	inUse := func(o Outcome) Decision { return Decision{Verdict: InFlight} }
	tr, _ := newTestTransport(t, Config{Base: statusBase(&calls, "{}", nil, 409), MaxAttempts: 2, NoBudget: true, Classifier: inUse})
	_, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/", `{}`))
	assert.ErrorIs(t, err, ErrKeyInFlight)
	assert.ErrorIs(t, err, ErrOutcomeUnknown)

	calls = 0 // without a key there is no operation to wait for: the response
	resp, err := tr.RoundTrip(post(t, WithoutKey(context.Background()), "http://api.test/", `{}`))
	require.NoError(t, err)
	assert.Equal(t, 409, resp.StatusCode)
	assert.Equal(t, 1, calls)
	discard(resp)
}

// What a Classifier sees: the attempt's request and key, the certainty, the
// status, the header, and the start of an error's body, read ahead for it
// whatever its Content-Type; the caller still gets the whole body.
func TestClassifierOutcome(t *testing.T) {
	calls := 0
	body := `{"error":{"code":"idempotency_key_in_use"}}` + strings.Repeat(" ", 20<<10)
	var seen []Outcome
	cl := func(o Outcome) Decision {
		o.Body = append([]byte(nil), o.Body...)
		seen = append(seen, o)
		return Decision{Verdict: Stop}
	}
	tr, _ := newTestTransport(t, Config{Base: statusBase(&calls, body, http.Header{"X-Api": {"v2"}}, 409),
		Classifier: cl})
	resp, err := tr.RoundTrip(post(t, WithKey(context.Background(), "k-1"), "http://api.test/", `{}`))
	require.NoError(t, err)
	assert.Equal(t, body, readAll(t, resp), "the caller reads the whole body")
	require.Len(t, seen, 1)
	o := seen[0]
	assert.Equal(t, Responded, o.Certainty)
	assert.Equal(t, 409, o.Status)
	assert.Equal(t, "v2", o.Header.Get("X-Api"))
	assert.Equal(t, "k-1", o.Key)
	assert.Equal(t, 1, o.Attempts)
	assert.Equal(t, "k-1", o.Request.Header.Get(KeyHeader))
	assert.Len(t, o.Body, maxProblemBytes, "the first 16 KiB")
	assert.True(t, strings.HasPrefix(string(o.Body), `{"error":{"code":"idempotency_key_in_use"}}`))
}

// No Classifier makes an ambiguous attempt of an unkeyed POST retried:
// nothing shows that it did not take effect.
func TestClassifierCannotRetryUnsafeAmbiguous(t *testing.T) {
	a := &api{fault: func(n int, w http.ResponseWriter) bool { return dropFIN(w) }}
	srv := a.start(t)
	retry := func(Outcome) Decision { return Decision{Verdict: Retry} }
	tr, _ := newTestTransport(t, Config{Classifier: retry})
	_, err := tr.RoundTrip(post(t, WithoutKey(context.Background()), srv.URL, `{}`))
	assert.ErrorIs(t, err, ErrOutcomeUnknown)
	assert.EqualValues(t, 1, a.requests.Load())
}

// The call's Classifier (WithClassifier) is asked before Config's, which
// decides when the call's defers; WithClassifier(nil) removes an earlier one.
func TestWithClassifierFirst(t *testing.T) {
	var order []string
	named := func(name string, d Decision) Classifier { // d for a 503, Defer otherwise
		return func(o Outcome) Decision {
			order = append(order, name)
			if o.Status != 503 {
				return Decision{}
			}
			return d
		}
	}
	calls := 0
	tr, _ := newTestTransport(t, Config{Base: statusBase(&calls, "", nil, 503, 201), NoBudget: true,
		Classifier: named("config", Decision{Verdict: Stop})})

	ctx := WithClassifier(context.Background(), named("call", Decision{}))
	resp, err := tr.RoundTrip(post(t, ctx, "http://api.test/", `{}`))
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode, "the config's Stop, after the call's Defer")
	assert.Equal(t, []string{"call", "config"}, order)

	order, calls = nil, 0
	ctx = WithClassifier(context.Background(), named("call", Decision{Verdict: Retry}))
	resp, err = tr.RoundTrip(post(t, ctx, "http://api.test/", `{}`))
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode, "the call's Retry")
	assert.Equal(t, []string{"call", "call", "config"}, order, "the config's asked about the 201 only")

	order, calls = nil, 0
	ctx = WithClassifier(WithClassifier(context.Background(), named("call", Decision{Verdict: Retry})), nil)
	resp, err = tr.RoundTrip(post(t, ctx, "http://api.test/", `{}`))
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, []string{"config"}, order)
}

// A Classifier is not asked about an attempt that the breaker refused.
func TestClassifierNotAskedWhenBreakerOpen(t *testing.T) {
	asked := 0
	cl := func(Outcome) Decision { asked++; return Decision{Verdict: Retry} }
	calls := 0
	tr, _ := newTestTransport(t, Config{Base: statusBase(&calls, "", nil, 503), MaxAttempts: 1, NoBudget: true,
		FailFast: true, Classifier: cl, Breaker: BreakerConfig{ConsecutiveFailures: 1}})
	resp, err := tr.RoundTrip(mustGet(t, "http://api.test/"))
	require.NoError(t, err, "one attempt allowed: the 503 is returned")
	discard(resp)
	_, err = tr.RoundTrip(mustGet(t, "http://api.test/"))
	assert.ErrorIs(t, err, ErrCircuitOpen)
	assert.Equal(t, 1, asked)
}
