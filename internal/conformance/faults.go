package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/testserver"
)

// faultAttempts bounds the attempts of each operation of the faults check.
const faultAttempts = 6

// faultKinds are the faults of the faults check, with their chance per
// attempt: the response dropped after the handler ran (RST), a reset
// before the request is read, a response slower than the client's attempt
// timeout, and a body cut short. The first operations meet each kind once
// on their first attempt, so every run has them all; the rest meet the
// seeded mix.
var faultKinds = []struct {
	p    float64
	kind testserver.FaultKind
}{
	{0.10, testserver.FaultDropReset},
	{0.08, testserver.FaultReset},
	{0.08, testserver.FaultDelayResponse},
	{0.06, testserver.FaultPartialBody},
}

// faultRig is the faults check's apparatus: a testserver proxy on
// loopback in front of the endpoint, and an idem client that goes through
// it.
type faultRig struct {
	r        *runner
	srv      *testserver.Server
	client   *http.Client
	target   string        // the endpoint's URL, through the proxy
	deadline time.Duration // bounds each operation, retries included

	// What the run found so far.
	history testserver.History
	ledger  testserver.Ledger
	ops     map[string]int // key -> operation number
	last    int64          // the count after the latest operation
	// timeouts counts the client's attempts that ran out of time: the
	// proxy's slow responses, and the server's own slowness.
	timeouts atomic.Int64
}

// newFaultRig starts the proxy. The caller must close the rig.
func (r *runner) newFaultRig() (*faultRig, error) {
	u, err := url.Parse(r.cfg.URL)
	if err != nil {
		return nil, err
	}
	srv, err := testserver.NewProxy([]string{u.Scheme + "://" + u.Host}, testserver.Config{KeyHeader: r.cfg.KeyHeader})
	if err != nil {
		return nil, err
	}
	g := &faultRig{r: r, srv: srv, target: srv.URL + u.RequestURI(),
		deadline: faultAttempts * (r.cfg.AttemptTimeout + time.Second), ops: make(map[string]int)}
	g.client = r.faultClient(&g.timeouts)
	return g, nil
}

// close stops the proxy and the client's connections.
func (g *faultRig) close() {
	g.client.CloseIdleConnections()
	g.srv.Close()
}

// faultClient is the idem client of the faults check: up to faultAttempts
// attempts with short backoff; no retry budget and no circuit breaker,
// which exist to protect a service from its clients, not to be tested
// here (a breaker that opened would turn operations into failures that no
// fault caused). It counts in timeouts the attempts that ran out of time.
func (r *runner) faultClient(timeouts *atomic.Int64) *http.Client {
	c := idem.NewClient(idem.Config{
		Base: newTransport(), KeyHeader: r.cfg.KeyHeader, MaxAttempts: faultAttempts, AttemptTimeout: r.cfg.AttemptTimeout,
		Backoff:  idem.Backoff{Base: 50 * time.Millisecond, Cap: time.Second},
		NoBudget: true, Breaker: idem.BreakerConfig{Disabled: true},
		Observer: idem.Observer{OnAttempt: func(a idem.Attempt) {
			if errors.Is(a.Err, context.DeadlineExceeded) {
				timeouts.Add(1)
			}
		}},
	})
	c.CheckRedirect = noRedirects
	return c
}

// script returns the faults of operation n's attempts: a function of the
// seed, n and the attempt only, so the same seed gives the same faults.
func (g *faultRig) script(n int) []testserver.Fault {
	out := make([]testserver.Fault, faultAttempts)
	if n <= len(faultKinds) {
		out[0] = g.fault(faultKinds[n-1].kind)
		return out
	}
	for a := range out {
		u := testserver.Draw(g.r.cfg.Seed, "idemcheck-faults", strconv.Itoa(n), a+1)
		acc := 0.0
		for _, k := range faultKinds {
			if acc += k.p; u < acc {
				out[a] = g.fault(k.kind)
				break
			}
		}
	}
	return out
}

// fault returns a fault of kind; a slow response lasts twice the
// client's attempt timeout.
func (g *faultRig) fault(kind testserver.FaultKind) testserver.Fault {
	f := testserver.Fault{Kind: kind}
	if kind == testserver.FaultDelayResponse {
		f.Delay = 2 * g.r.cfg.AttemptTimeout
	}
	return f
}

// verdict is what the client concluded about one operation.
type verdict struct {
	kind testserver.OutcomeKind
	id   string
	err  error
}

// do makes one operation through the proxy with the idem client, under
// key, and concludes as the e2e suite does: ok on a 2xx, a definite
// failure on a 4xx or on an error after which the client knows nothing
// took effect, unknown otherwise. A final 409, 425, 429 or 503 tells the
// client to wait (the concurrent check's waitStatuses): the operation may
// still run, so its outcome is unknown.
func (g *faultRig) do(ctx context.Context, key string, body []byte) verdict {
	ctx, cancel := context.WithTimeout(idem.WithKey(ctx, key), g.deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, g.r.cfg.Method, g.target, bytes.NewReader(body))
	if err != nil {
		return verdict{kind: testserver.OutcomeFailed, err: err}
	}
	req.Header = g.r.headers(false)
	resp, err := g.client.Do(req)
	if err != nil {
		var e *idem.Error
		if errors.As(err, &e) && !e.MayHaveTakenEffect {
			return verdict{kind: testserver.OutcomeFailed, err: err}
		}
		return verdict{kind: testserver.OutcomeUnknown, err: err}
	}
	defer resp.Body.Close()
	x := g.r.read(resp)
	switch {
	case x.err != nil:
		return verdict{kind: testserver.OutcomeUnknown, err: x.err}
	case x.ok2xx():
		id, _ := g.r.id(x)
		return verdict{kind: testserver.OutcomeOK, id: id}
	case waitStatuses[x.status]:
		return verdict{kind: testserver.OutcomeUnknown, err: fmt.Errorf("told to wait, HTTP %d: %s", x.status, clip(x.body))}
	case x.refused():
		return verdict{kind: testserver.OutcomeFailed, err: fmt.Errorf("HTTP %d: %s", x.status, clip(x.body))}
	}
	return verdict{kind: testserver.OutcomeUnknown, err: fmt.Errorf("HTTP %d: %s", x.status, clip(x.body))}
}
