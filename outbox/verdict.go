package outbox

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/wire"
)

// What a parked message keeps of its last response: the first
// keptBodyBytes of the body, and header values, whole, up to keptHeaders
// of them and keptHeaderBytes of names and values in all.
const (
	keptBodyBytes   = 4 << 10
	keptHeaderBytes = 4 << 10
	keptHeaders     = 64
)

// verdict is what one delivery attempt means for its message.
type verdict int

const (
	// delivered: the downstream took the message (2xx, or 500
	// result-unavailable: it ran the operation but cannot replay it).
	delivered verdict = iota + 1
	// refused: a definite refusal (a 4xx other than 408, 409 key-in-flight,
	// 425 and 429, a 1xx or 3xx, or a key refusal): sending it again
	// would be refused again, so it is parked.
	refused
	// retry: not sent, ambiguous, 408, 409 key-in-flight, 425, 429, 5xx, or
	// given up by the client (deadline, budget, breaker) after a request:
	// try again later.
	retry
	// localRefusal: the idem client put nothing on the wire because its
	// circuit breaker or its retry budget refused: a failed delivery, tried
	// again after a backoff, whose wake is paced (see refusals).
	localRefusal
)

func (v verdict) String() string {
	switch v {
	case delivered:
		return "delivered"
	case refused:
		return "refused"
	case retry:
		return "retry"
	case localRefusal:
		return "refused-locally"
	}
	return "unknown"
}

// result is a classified delivery attempt: the verdict and what the
// downstream answered, for the parked message's record.
type result struct {
	verdict    verdict
	status     int
	header     http.Header
	body       []byte // the first keptBodyBytes
	retryAfter time.Duration
	err        error
	// acted says whether the downstream may have acted on the delivery:
	// a 2xx, a 5xx, a 409 key-in-flight, or an error of the client with
	// MayHaveTakenEffect.
	acted bool
}

// classify turns what the idem client returned for one delivery into a
// result. It is the single place where the outbox decides between
// delivered, parked and retried: the Postgres and the memory outboxes both
// use it. It reads (the first keptBodyBytes of) and closes resp's body;
// now is when the response arrived, for a Retry-After given as a date.
func classify(resp *http.Response, err error, now time.Time) result {
	if err != nil {
		return classifyError(err)
	}
	defer resp.Body.Close()
	r := result{status: resp.StatusCode, header: keptHeader(resp.Header)}
	r.body, _ = io.ReadAll(io.LimitReader(resp.Body, keptBodyBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	r.verdict = statusVerdict(resp.StatusCode, resp.Header.Get("Content-Type"), r.body)
	r.acted = r.verdict == delivered || r.status >= 500 || r.status == http.StatusConflict && r.verdict == retry
	if ra, ok := wire.ParseRetryAfter(resp.Header.Get(wire.HeaderRetryAfter), now); ok {
		r.retryAfter = ra
	}
	return r
}

// explaining are the response headers a parked message keeps first: those
// that say what the response was and when to try again.
var explaining = []string{"Content-Type", "Retry-After", "Location", "Www-Authenticate", "Date"}

// keptHeader returns what a parked message keeps of h: its values, each
// whole, the explaining headers first and then in the order of their
// names, up to keptHeaders values and keptHeaderBytes of names and values;
// a value that does not fit is left out (a short one after it may still
// fit), so that a downstream's huge header costs the record nothing.
func keptHeader(h http.Header) http.Header {
	names := slices.DeleteFunc(slices.Sorted(maps.Keys(h)), func(n string) bool { return slices.Contains(explaining, n) })
	names = append(slices.Clone(explaining), names...)
	out := http.Header{}
	count, size := 0, 0
	for _, name := range names {
		for _, v := range h[name] {
			if count == keptHeaders {
				return out
			}
			if size+len(name)+len(v) > keptHeaderBytes {
				continue
			}
			out[name] = append(out[name], v)
			count, size = count+1, size+len(name)+len(v)
		}
	}
	return out
}

// statusVerdict classifies a response by its status (and, for 409, its
// problem type).
func statusVerdict(status int, contentType string, body []byte) verdict {
	switch {
	case status >= 200 && status < 300:
		return delivered
	case status >= 500, status == http.StatusRequestTimeout, status == http.StatusTooEarly,
		status == http.StatusTooManyRequests:
		return retry
	case status == http.StatusConflict:
		if p, ok := wire.ReadProblem(contentType, bytes.NewReader(body), keptBodyBytes); ok && p.Name() == wire.ProblemKeyInFlight {
			return retry
		}
	}
	return refused
}

// classifyError classifies an error of the idem client: a refusal of the
// key itself is parked, an operation the downstream ran but cannot replay
// is delivered, anything else (not sent, ambiguous, attempts, deadline,
// budget, breaker, key in flight) is retried.
func classifyError(err error) result {
	r := result{verdict: retry, err: err, acted: true}
	var ie *idem.Error
	if errors.As(err, &ie) {
		r.status, r.retryAfter, r.acted = ie.Status, ie.RetryAfter, ie.MayHaveTakenEffect
	}
	switch {
	case errors.Is(err, idem.ErrResultUnavailable):
		r.verdict = delivered
	case errors.Is(err, idem.ErrKeyReused), errors.Is(err, idem.ErrKeyMissing), errors.Is(err, idem.ErrKeyInvalid):
		r.verdict = refused
	case ie != nil && ie.Attempts == 0 && (errors.Is(err, idem.ErrCircuitOpen) || errors.Is(err, idem.ErrBudgetExhausted)):
		r.verdict = localRefusal
	}
	return r
}
