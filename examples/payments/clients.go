package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/testserver"
)

// paymentDeadline bounds each payment of the idem client, retries and
// waits included.
const paymentDeadline = 8 * time.Second

// verdict is what a client concluded about one payment.
type verdict struct {
	kind      testserver.OutcomeKind
	paymentID string // OutcomeOK only
	err       error  // why, for the other kinds
}

// payer makes one payment against the API at url, as tenant, and says how
// long it waited before its retries.
type payer interface {
	pay(ctx context.Context, url, token string, op operation) verdict
	waited() *waits
}

// waits adds up a client's waits before its retries, over all payments:
// the waits a server asked for (Retry-After) and the client's own.
type waits struct {
	retryAfter, own atomic.Int64 // nanoseconds
}

func (w *waits) add(d time.Duration, retryAfter bool) {
	if retryAfter {
		w.retryAfter.Add(int64(d))
	} else {
		w.own.Add(int64(d))
	}
}

// idemPayer pays through an idem client. It counts the breaker trips it
// sees and how long the breaker was not closed; its Budget counts the
// retries it denied.
type idemPayer struct {
	client *http.Client
	budget *idem.Budget
	trips  atomic.Int64
	waits  waits

	mu        sync.Mutex
	openSince time.Time     // when the breaker last left closed; zero while closed
	notClosed time.Duration // open or probing, before openSince
}

// newIdemPayer configures the idem client as a payments service would:
// 5 attempts at most, a short per-attempt timeout, quick backoff, and the
// default retry budget and circuit breaker.
func newIdemPayer(base http.RoundTripper, attemptTimeout time.Duration) *idemPayer {
	p := &idemPayer{budget: idem.NewBudget(idem.BudgetConfig{})}
	p.client = idem.NewClient(idem.Config{
		Base:           base,
		MaxAttempts:    5,
		AttemptTimeout: attemptTimeout,
		Backoff:        idem.Backoff{Base: 25 * time.Millisecond, Cap: time.Second},
		Budget:         p.budget,
		Observer: idem.Observer{
			OnBreakerChange: p.breakerChanged,
			OnRetry:         func(a idem.Attempt, wait time.Duration) { p.waits.add(wait, a.RetryAfter > 0) },
		},
	})
	return p
}

// breakerChanged counts trips and the time the breaker is not closed.
func (p *idemPayer) breakerChanged(_ string, from, to idem.BreakerState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case to == idem.BreakerOpen && from == idem.BreakerClosed:
		p.trips.Add(1)
		p.openSince = time.Now()
	case to == idem.BreakerClosed && !p.openSince.IsZero():
		p.notClosed += time.Since(p.openSince)
		p.openSince = time.Time{}
	}
}

// breakerNotClosed returns how long the breaker was open or probing so
// far.
func (p *idemPayer) breakerNotClosed() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.notClosed
	if !p.openSince.IsZero() {
		d += time.Since(p.openSince)
	}
	return d
}

func (p *idemPayer) waited() *waits { return &p.waits }

func (p *idemPayer) pay(ctx context.Context, url, token string, op operation) verdict {
	ctx, cancel := context.WithTimeout(idem.WithKey(ctx, op.id), paymentDeadline)
	defer cancel()
	resp, err := p.client.Do(paymentRequest(ctx, url, token, op))
	if err != nil {
		return errorVerdict(err)
	}
	return readVerdict(resp)
}

// errorVerdict concludes from a call of the idem client that ended with an
// error, with the same rules as the e2e suite's: a definite failure only
// when the client knows that no attempt may have taken effect (an
// *idem.Error without MayHaveTakenEffect), unknown otherwise.
func errorVerdict(err error) verdict {
	var e *idem.Error
	if errors.As(err, &e) && !e.MayHaveTakenEffect {
		return verdict{kind: testserver.OutcomeFailed, err: err}
	}
	return verdict{kind: testserver.OutcomeUnknown, err: err}
}

// Why the idem client gave a payment up, as the report counts it.
const (
	gaveUpBreaker  = "breaker"  // its host's breaker did not let it through in time
	gaveUpBudget   = "budget"   // the retry budget had no token in time
	gaveUpDeadline = "deadline" // its deadline came first
	gaveUpAttempts = "attempts" // its attempts ran out
	gaveUpOther    = "other"
)

// gaveUpReason names why an idem client's call ended without a payment,
// "" for an error that is not the idem client's.
func gaveUpReason(err error) string {
	var e *idem.Error
	switch {
	case !errors.As(err, &e):
		return ""
	case errors.Is(err, idem.ErrCircuitOpen):
		return gaveUpBreaker
	case errors.Is(err, idem.ErrBudgetExhausted):
		return gaveUpBudget
	case errors.Is(err, idem.ErrDeadline), errors.Is(err, context.DeadlineExceeded):
		return gaveUpDeadline
	case errors.Is(err, idem.ErrAttemptsExhausted), errors.Is(err, idem.ErrKeyInFlight):
		return gaveUpAttempts
	}
	return gaveUpOther
}

// naivePayer pays the way a lot of code does: a plain http.Client with a
// timeout, and a loop that retries any error or 5xx (any answer whose
// verdict is unknown) a few times, without an Idempotency-Key. The request says which payment it is only in the body's
// reference and in X-Operation-Id, which the API ignores and the
// testserver reads to number the attempts.
type naivePayer struct {
	client *http.Client
	tries  int
	pause  time.Duration
	waits  waits
}

func newNaivePayer(base http.RoundTripper, attemptTimeout time.Duration) *naivePayer {
	return &naivePayer{client: &http.Client{Transport: base, Timeout: attemptTimeout}, tries: 4, pause: 50 * time.Millisecond}
}

func (p *naivePayer) waited() *waits { return &p.waits }

func (p *naivePayer) pay(ctx context.Context, url, token string, op operation) verdict {
	var v verdict
	for try := 1; ; try++ {
		req := paymentRequest(ctx, url, token, op)
		req.Header.Set(operationHeader, op.id)
		resp, err := p.client.Do(req)
		if err != nil {
			v = verdict{kind: testserver.OutcomeUnknown, err: err} // it was sent: it may have been paid
		} else {
			v = readVerdict(resp)
		}
		if v.kind != testserver.OutcomeUnknown || try == p.tries {
			return v
		}
		select { // "just retry": any error, any 5xx, Retry-After ignored
		case <-time.After(p.pause):
			p.waits.add(p.pause, false)
		case <-ctx.Done():
			return v
		}
	}
}

// operationHeader carries the naive client's operation id, for the
// testserver only (Config.OperationHeader).
const operationHeader = "X-Operation-Id"

// paymentRequest builds the POST /v1/payments of op.
func paymentRequest(ctx context.Context, url, token string, op operation) *http.Request {
	body, _ := json.Marshal(map[string]any{
		"account_id": op.account, "amount_cents": op.amount, "currency": "EUR", "reference": op.id,
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/payments", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// readVerdict concludes from a response, with the same rules as the e2e
// suite's: a 2xx with a payment id is ok; a 4xx is a definite failure (402,
// 400: the API made no payment; the idem client turns a 4xx that follows
// an attempt that may have acted into an error instead); anything else (a
// 3xx, a 5xx that a proxy may answer for a payment that was made, a body
// cut short or without a payment id) leaves the outcome unknown.
func readVerdict(resp *http.Response) verdict {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var p struct {
		PaymentID string `json:"payment_id"`
	}
	code := resp.StatusCode
	switch {
	case err != nil:
		return verdict{kind: testserver.OutcomeUnknown, err: fmt.Errorf("HTTP %s, reading the response: %w", resp.Status, err)}
	case code >= 400 && code < 500:
		return verdict{kind: testserver.OutcomeFailed, err: fmt.Errorf("HTTP %s", resp.Status)}
	case code < 200 || code >= 300:
		return verdict{kind: testserver.OutcomeUnknown, err: fmt.Errorf("HTTP %s", resp.Status)}
	case json.Unmarshal(body, &p) != nil || p.PaymentID == "":
		return verdict{kind: testserver.OutcomeUnknown, err: fmt.Errorf("HTTP %s without a payment id: %q", resp.Status, body)}
	}
	return verdict{kind: testserver.OutcomeOK, paymentID: p.PaymentID}
}
