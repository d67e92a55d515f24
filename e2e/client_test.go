package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/testserver"
)

// clientConfig is the idem client of the suite, configured as a payments
// service on a bad network would configure it: attemptTimeout per attempt,
// 8 attempts, quick full-jitter backoff capped at 500 ms, Retry-After
// clamped to 2 s. The retry budget earns half a retry per first attempt:
// the suite's fault rates (10 to 20% of attempts) are far above a healthy
// service's, and the default 10% would deny retries the faults make
// necessary. The breaker trips on 50 failures in a row (the default 10 suits
// a client with a few calls in flight; here 16 calls share a host whose
// attempts fail one in seven, and a server restart fails all of them at
// once) and probes again after 250 ms, so that a restarted server is
// noticed soon.
func clientConfig(attemptTimeout time.Duration) idem.Config {
	return idem.Config{
		MaxAttempts:    8,
		AttemptTimeout: attemptTimeout,
		Backoff:        idem.Backoff{Base: 10 * time.Millisecond, Cap: 500 * time.Millisecond},
		MaxRetryAfter:  2 * time.Second,
		Budget:         idem.NewBudget(idem.BudgetConfig{Ratio: 0.5}),
		Breaker:        idem.BreakerConfig{ConsecutiveFailures: 50, OpenTimeout: 250 * time.Millisecond},
	}
}

// verdict is what the client concluded about one operation.
type verdict struct {
	kind   testserver.OutcomeKind
	status int    // the last status received, 0 when none
	result string // the id of the effect, a payment's or a charge's (OutcomeOK only)
	// replayed is true when the response was a stored one
	// (Idempotent-Replayed: true).
	replayed bool
	err      error // why, for the other kinds
}

// route is an operation's endpoint of the payments API: the path it is
// POSTed to, its body, and the member of the 201 body that names the effect.
type route struct {
	path    string
	idField string
	body    func(op operation) map[string]any
}

// paymentsRoute makes an operation a payment: POST /v1/payments.
var paymentsRoute = route{
	path:    "/v1/payments",
	idField: "payment_id",
	body: func(op operation) map[string]any {
		return map[string]any{"account_id": op.account, "amount_cents": op.amount, "currency": "EUR", "reference": op.key}
	},
}

// payer makes payments (or, with another route, charges) through an idem
// client, as an application does: one stored key per operation
// (idem.WithKey), each call bounded by a deadline, and, when resendFor is
// set, an operation whose outcome is unknown is sent again with its key
// until the answer is definite or resendFor has passed (the client's retry
// budget or breaker may end a call early; the key makes the resend safe).
// It is safe for concurrent use.
type payer struct {
	client    *http.Client
	url       string        // the API's base URL
	route     route         // what an operation calls: paymentsRoute unless set after newPayer
	deadline  time.Duration // bounds each call, retries and waits included
	resendFor time.Duration // zero: never resend

	mu    sync.Mutex
	tries map[string]int // requests put on the wire, by key
}

// resendPause is how long a payer waits before it resends a payment.
const resendPause = 100 * time.Millisecond

func newPayer(url string, cfg idem.Config, deadline, resendFor time.Duration) *payer {
	p := &payer{url: url, route: paymentsRoute, deadline: deadline, resendFor: resendFor, tries: map[string]int{}}
	cfg.Observer.OnAttempt = func(a idem.Attempt) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.tries[a.Key] += a.Wire
	}
	p.client = idem.NewClient(cfg)
	return p
}

// deadlineOf returns what bounds each call of op: its own deadline, or
// the payer's.
func (p *payer) deadlineOf(op operation) time.Duration {
	if op.deadline > 0 {
		return op.deadline
	}
	return p.deadline
}

// attempts returns how many requests the payer put on the wire for key.
func (p *payer) attempts(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tries[key]
}

// pay makes op's payment, resending it while its outcome is unknown or
// the client declined to send it (its breaker open, its budget spent: a
// local decision, which says nothing of an earlier call's effect). A
// payment that ends on such a decision after a call whose outcome was
// unknown stays unknown: the earlier call may have taken effect.
func (p *payer) pay(ctx context.Context, op operation) verdict {
	stop := time.Now().Add(p.resendFor)
	unknown := false
	for {
		v := p.call(ctx, op)
		local := localDecision(v.err)
		if local && unknown {
			v.kind = testserver.OutcomeUnknown
		}
		unknown = unknown || v.kind == testserver.OutcomeUnknown
		if (v.kind != testserver.OutcomeUnknown && !local) || !time.Now().Before(stop) {
			return v
		}
		select {
		case <-ctx.Done():
			return v
		case <-time.After(resendPause):
		}
	}
}

// localDecision reports an error of a call the client ended without
// sending (a breaker open, a retry budget spent, no slot of the host's
// concurrency limit, no room in its announced quota).
func localDecision(err error) bool {
	return errors.Is(err, idem.ErrCircuitOpen) || errors.Is(err, idem.ErrBudgetExhausted) ||
		errors.Is(err, idem.ErrOverloaded) || errors.Is(err, idem.ErrRateLimited)
}

// TestLocalDecision: every error by which the client ends a call without
// sending it is a local decision, which leaves an operation whose earlier
// call had an unknown outcome unknown, not failed.
func TestLocalDecision(t *testing.T) {
	for _, err := range []error{idem.ErrCircuitOpen, idem.ErrBudgetExhausted, idem.ErrOverloaded, idem.ErrRateLimited} {
		assert.True(t, localDecision(fmt.Errorf("a call: %w", err)), "%v", err)
	}
	assert.False(t, localDecision(errors.New("connection reset")))
	assert.False(t, localDecision(nil))
}

// call makes one call of the idem client for op.
func (p *payer) call(ctx context.Context, op operation) verdict {
	ctx, cancel := context.WithTimeout(idem.WithKey(ctx, op.key), p.deadlineOf(op))
	defer cancel()
	body, err := json.Marshal(p.route.body(op))
	if err != nil {
		return verdict{kind: testserver.OutcomeFailed, err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+p.route.path, bytes.NewReader(body))
	if err != nil {
		return verdict{kind: testserver.OutcomeFailed, err: err}
	}
	req.Header.Set("Authorization", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return errorVerdict(err)
	}
	return responseVerdict(resp, p.route.idField)
}

// errorVerdict concludes from a call that ended without a response, with
// the same rules as the demo's (examples/payments/clients.go): a definite
// failure only when the client knows that no attempt may have taken effect
// (an *idem.Error without MayHaveTakenEffect), unknown otherwise.
func errorVerdict(err error) verdict {
	var e *idem.Error
	if errors.As(err, &e) {
		v := verdict{kind: testserver.OutcomeUnknown, status: e.Status, err: err}
		if !e.MayHaveTakenEffect {
			v.kind = testserver.OutcomeFailed
		}
		return v
	}
	return verdict{kind: testserver.OutcomeUnknown, err: err}
}

// responseVerdict concludes from a response, with the same rules as the
// demo's: a 2xx with the effect's id (the idField member of its JSON body:
// a payment id, a charge id) is ok; a 4xx is a definite failure (402
// is the payment's outcome, 400 a refusal that stored nothing; the idem
// client turns a 4xx that follows an attempt that may have acted into an
// error instead); anything else (a 3xx, a 5xx, a body cut short or without
// the id) leaves the outcome unknown.
func responseVerdict(resp *http.Response, idField string) verdict {
	defer resp.Body.Close()
	code := resp.StatusCode
	v := verdict{kind: testserver.OutcomeUnknown, status: code, replayed: resp.Header.Get(wire.HeaderReplayed) == "true"}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case err != nil:
		v.err = fmt.Errorf("%d with a body cut short: %w", code, err)
	case code >= 400 && code < 500:
		v.kind, v.err = testserver.OutcomeFailed, fmt.Errorf("%d: %s", code, data)
	case code < 200 || code >= 300:
		v.err = fmt.Errorf("%d: %s", code, data)
	case effectID(data, idField) == "":
		v.err = fmt.Errorf("%d without a %s: %q", code, idField, data)
	default:
		v.kind, v.result = testserver.OutcomeOK, effectID(data, idField)
	}
	return v
}

// effectID returns the string member idField of a JSON object, "" when
// data is no such object.
func effectID(data []byte, idField string) string {
	var created map[string]any
	if json.Unmarshal(data, &created) != nil {
		return ""
	}
	id, _ := created[idField].(string)
	return id
}

// retriedOps counts the operations for which p put more than one request
// on the wire.
func retriedOps(p *payer, ops []operation) int {
	var n int
	for _, op := range ops {
		if p.attempts(op.key) > 1 {
			n++
		}
	}
	return n
}

// The verdict rules, the same as the demo's (TestVerdicts in
// examples/payments).
func TestResponseAndErrorVerdicts(t *testing.T) {
	const paid = `{"payment_id":"pay_1"}`
	cases := []struct {
		name string
		v    verdict
		want testserver.OutcomeKind
	}{
		{"201 with a payment id", responseVerdict(response(201, strings.NewReader(paid)), "payment_id"), testserver.OutcomeOK},
		{"200 with a payment id", responseVerdict(response(200, strings.NewReader(paid)), "payment_id"), testserver.OutcomeOK},
		{"201 with a charge id", responseVerdict(response(201, strings.NewReader(`{"charge_id":"ch_1"}`)), "charge_id"), testserver.OutcomeOK},
		{"201 with a payment id, want a charge id", responseVerdict(response(201, strings.NewReader(paid)), "charge_id"), testserver.OutcomeUnknown},
		{"201 without a payment id", responseVerdict(response(201, strings.NewReader(`{"id":1}`)), "payment_id"), testserver.OutcomeUnknown},
		{"201 cut short", responseVerdict(response(201, io.MultiReader(strings.NewReader(paid[:4]), iotest.ErrReader(io.ErrUnexpectedEOF))), "payment_id"), testserver.OutcomeUnknown},
		{"303", responseVerdict(response(303, strings.NewReader(paid)), "payment_id"), testserver.OutcomeUnknown},
		{"400", responseVerdict(response(400, strings.NewReader("")), "payment_id"), testserver.OutcomeFailed},
		{"402", responseVerdict(response(402, strings.NewReader("")), "payment_id"), testserver.OutcomeFailed},
		{"422", responseVerdict(response(422, strings.NewReader("")), "payment_id"), testserver.OutcomeFailed},
		{"503", responseVerdict(response(503, strings.NewReader("")), "payment_id"), testserver.OutcomeUnknown},
		{"idem error, may have acted", errorVerdict(&url.Error{Err: &idem.Error{Status: 502, MayHaveTakenEffect: true}}), testserver.OutcomeUnknown},
		{"idem error, certainly did not", errorVerdict(&url.Error{Err: &idem.Error{Status: 503}}), testserver.OutcomeFailed},
		{"another error", errorVerdict(errors.New("boom")), testserver.OutcomeUnknown},
	}
	for _, c := range cases {
		if c.v.kind != c.want {
			t.Errorf("%s: verdict %s (%v), want %s", c.name, c.v.kind, c.v.err, c.want)
		}
	}
}

// response returns a response of status with body, for the verdict tests.
func response(status int, body io.Reader) *http.Response {
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(body)}
}
