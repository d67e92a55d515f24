package otelidem

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/idemkit/idem"
)

// attemptKey is the attribute values of an attempt's measurement.
type attemptKey struct {
	method string
	endpoint
	certainty idem.Certainty
	status    int
	problem   string
	hedge     bool
}

func (k attemptKey) attrs() []attribute.KeyValue {
	kv := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(k.method), keyCertainty.String(certainty(k.certainty))}
	kv = k.endpoint.attrs(kv)
	if k.status != 0 {
		kv = append(kv, semconv.HTTPResponseStatusCode(k.status))
	}
	if k.problem != "" {
		kv = append(kv, keyProblem.String(k.problem))
	}
	if k.hedge {
		kv = append(kv, keyHedge.Bool(true))
	}
	return kv
}

// retryKey is the attribute values of a retry's measurements.
type retryKey struct {
	method string
	endpoint
	reason string
	status int // with reasonStatus
}

func (k retryKey) attrs() []attribute.KeyValue {
	kv := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(k.method), keyRetryReason.String(k.reason)}
	kv = k.endpoint.attrs(kv)
	if k.status != 0 {
		kv = append(kv, semconv.HTTPResponseStatusCode(k.status))
	}
	return kv
}

// callKey is the attribute values of a call that ended with an error.
type callKey struct {
	method string
	endpoint
	kind    string
	unknown bool
}

func (k callKey) attrs() []attribute.KeyValue {
	kv := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(k.method), semconv.ErrorTypeKey.String(k.kind),
		keyOutcomeUnknown.Bool(k.unknown)}
	return k.endpoint.attrs(kv)
}

// The retry reasons (idem.retry.reason): what the attempt retried got.
const (
	reasonNotSent   = "not_sent"      // it was not sent (a dial refused, an open breaker's probe...)
	reasonAmbiguous = "ambiguous"     // sent, no complete response
	reasonInFlight  = "key_in_flight" // 409 key-in-flight: the first request still runs
	reasonStatus    = "status"        // a response asking for a retry (http.response.status_code says which)
)

func retryReason(c idem.Certainty, problem string) string {
	switch {
	case c == idem.NotSent:
		return reasonNotSent
	case c == idem.Ambiguous:
		return reasonAmbiguous
	case problem == "key-in-flight":
		return reasonInFlight
	}
	return reasonStatus
}

// certainty names a Certainty as idem.certainty has it.
func certainty(c idem.Certainty) string {
	switch c {
	case idem.NotSent:
		return "not_sent"
	case idem.Ambiguous:
		return "ambiguous"
	case idem.Responded:
		return "responded"
	}
	return "unknown"
}

// errorKinds name the sentinels a call's *[idem.Error] may end for (its
// Reason), as error.type has them.
var errorKinds = []struct {
	err  error
	kind string
}{
	{idem.ErrKeyReused, "key_reused"},
	{idem.ErrKeyMissing, "key_missing"},
	{idem.ErrKeyInvalid, "key_invalid"},
	{idem.ErrKeyInFlight, "key_in_flight"},
	{idem.ErrResultUnavailable, "result_unavailable"},
	{idem.ErrOutcomeUnknown, "outcome_unknown"},
	{idem.ErrNotRewindable, "not_rewindable"},
	{idem.ErrDeadline, "deadline"},
	{idem.ErrAttemptsExhausted, "attempts_exhausted"},
	{idem.ErrBudgetExhausted, "budget_exhausted"},
	{idem.ErrCircuitOpen, "circuit_open"},
}

// errorKind names why a call ended: the *[idem.Error]'s Reason, else its
// context's end, else "_OTHER" (a Classifier's own error, say).
func errorKind(err error) string {
	var e *idem.Error
	if errors.As(err, &e) && e.Reason != nil {
		for _, k := range errorKinds {
			if e.Reason == k.err {
				return k.kind
			}
		}
		return semconv.ErrorTypeOther.Value.AsString()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "context_deadline"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}
