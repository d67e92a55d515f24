package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/testserver"
)

// clientConfig is the idem client of the suite, configured as a payments
// service on a bad network would configure it: attemptTimeout per attempt,
// 8 attempts, quick full-jitter backoff capped at 500 ms, Retry-After
// clamped to 2 s. The retry budget earns half a retry per first attempt:
// the suite's fault rates (10 to 20% of attempts) are far above a healthy
// service's, and the default 10% would deny retries the faults make
// necessary. The breaker trips on 50 failures in a row (the default 5 is
// for a client with a few calls in flight; with 16 in flight and one
// attempt in seven failing, 5 in a row happen by chance) and probes again
// after 250 ms, so that a restarted server is noticed soon.
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
	result string // the payment id (OutcomeOK only)
	// replayed is true when the response was a stored one
	// (Idempotent-Replayed: true).
	replayed bool
	err      error // why, for the other kinds
}

// payer makes payments through an idem client, as an application does: one
// stored key per payment (idem.WithKey), each call bounded by a deadline,
// and, when resendFor is set, a payment whose outcome is unknown is sent
// again with its key until the answer is definite or resendFor has passed
// (the client's retry budget or breaker may end a call early; the key
// makes the resend safe). It is safe for concurrent use.
type payer struct {
	client    *http.Client
	url       string        // the API's base URL
	deadline  time.Duration // bounds each call, retries and waits included
	resendFor time.Duration // zero: never resend

	mu    sync.Mutex
	tries map[string]int // requests put on the wire, by key
}

// resendPause is how long a payer waits before it resends a payment.
const resendPause = 100 * time.Millisecond

func newPayer(url string, cfg idem.Config, deadline, resendFor time.Duration) *payer {
	p := &payer{url: url, deadline: deadline, resendFor: resendFor, tries: map[string]int{}}
	cfg.Observer.OnAttempt = func(a idem.Attempt) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.tries[a.Key] += a.Wire
	}
	p.client = idem.NewClient(cfg)
	return p
}

// attempts returns how many requests the payer put on the wire for key.
func (p *payer) attempts(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tries[key]
}

// pay makes op's payment, resending it while its outcome is unknown.
func (p *payer) pay(ctx context.Context, op operation) verdict {
	stop := time.Now().Add(p.resendFor)
	for {
		v := p.call(ctx, op)
		if v.kind != testserver.OutcomeUnknown || !time.Now().Before(stop) {
			return v
		}
		select {
		case <-ctx.Done():
			return v
		case <-time.After(resendPause):
		}
	}
}

// call makes one call of the idem client for op.
func (p *payer) call(ctx context.Context, op operation) verdict {
	ctx, cancel := context.WithTimeout(idem.WithKey(ctx, op.key), p.deadline)
	defer cancel()
	body, err := json.Marshal(map[string]any{
		"account_id": op.account, "amount_cents": op.amount, "currency": "EUR", "reference": op.key,
	})
	if err != nil {
		return verdict{kind: testserver.OutcomeFailed, err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/v1/payments", bytes.NewReader(body))
	if err != nil {
		return verdict{kind: testserver.OutcomeFailed, err: err}
	}
	req.Header.Set("Authorization", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return errorVerdict(err)
	}
	return responseVerdict(resp)
}

// errorVerdict concludes from a call that ended without a response: a
// definite failure only when the client knows no attempt may have taken
// effect.
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

// responseVerdict concludes from a response: 201 with a payment id is ok,
// a 4xx a definite failure (402 is the payment's outcome, 400 a refusal
// that stored nothing), anything else, or a body cut short, unknown.
func responseVerdict(resp *http.Response) verdict {
	defer resp.Body.Close()
	v := verdict{kind: testserver.OutcomeUnknown, status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var created struct {
		PaymentID string `json:"payment_id"`
	}
	switch {
	case err != nil:
		v.err = fmt.Errorf("%d with a body cut short: %w", resp.StatusCode, err)
	case resp.StatusCode == http.StatusCreated:
		if err := json.Unmarshal(data, &created); err != nil || created.PaymentID == "" {
			v.err = fmt.Errorf("201 without a payment id: %q", data)
			return v
		}
		v.kind, v.result = testserver.OutcomeOK, created.PaymentID
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		v.kind, v.err = testserver.OutcomeFailed, fmt.Errorf("%d: %s", resp.StatusCode, data)
	default:
		v.err = fmt.Errorf("%d: %s", resp.StatusCode, data)
	}
	return v
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
