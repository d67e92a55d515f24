package idem

import (
	"net/http"

	"github.com/idemkit/idem/internal/wire"
)

// The client's knowledge of outcomes lives in this file, in one table
// (docs/CONTRACT.md §8). Every decision that depends on what an attempt
// produced reads it: the retry loop (what follows an attempt, and whether
// the operation may have taken effect), the read-ahead of response bodies
// (which statuses can carry a contract problem) and the host's circuit
// breaker (which attempts are failures of the host). A [Classifier]
// ([Config.Classifier], [WithClassifier]) is asked before the table and may
// choose another verdict; the breaker and "may have acted" always follow
// the table. The tables of docs/client.md and docs/CONTRACT.md §8 and the
// one below are tested against outcomes (outcomes_test.go), and so is
// README.md's sentence on the breaker's last row.
//
//	outcome of an attempt      verdict                breaker  may have acted
//	not sent                   Retry                  failure  no
//	ambiguous                  Retry if safe          failure  yes
//	408, 429                   Retry if safe          -        no
//	409 key-in-flight          InFlight               -        yes
//	409 outcome-uncertain      ErrOutcomeUncertain    -        yes
//	422 key-reused             ErrKeyReused           -        no
//	400 key-missing            ErrKeyMissing          -        no
//	400 key-invalid            ErrKeyInvalid          -        no
//	500 result-unavailable     ErrResultUnavailable   -        yes
//	500, 502, 503, 504         Retry if safe          failure  yes
//	another 5xx                Stop                   -        yes
//	any other response         Stop                   -        no
//
// "Retry if safe": retried when the request has a key or an idempotent
// method; otherwise an ambiguous attempt fails with [ErrOutcomeUnknown] and a
// response is returned (Stop). InFlight retries with the same key (a
// request without a key gets the response). A problem (409 key-in-flight,
// ...) is the name in an application/problem+json body with that status;
// the first row that matches an attempt decides. An attempt that its host's
// breaker does not let through is not in the table: it is not sent and not
// counted, and the call waits for the host within its deadline or, when
// that cannot succeed or the call is fail-fast, ends with [ErrCircuitOpen]
// ([BreakerConfig]); the contract tables of docs/client.md and
// docs/CONTRACT.md give it a last row of its own.

// rule is a row of the table: the outcomes it covers and what follows them.
type rule struct {
	certainty Certainty
	codes     []int  // the statuses it covers (Responded); nil: every status in [lo, hi]
	lo, hi    int    // when codes is nil
	problem   string // the problem name it needs, "" for none

	verdict  Verdict // Retry, InFlight, Stop or Fail
	safeOnly bool    // Retry only when the request is keyed or idempotent
	reason   error   // Fail's reason
	failure  bool    // the host's breaker counts the attempt as a failure
	acted    bool    // the server may have acted on the operation

	// The row's name in the table above, and its text in the contract
	// tables of docs/client.md and docs/CONTRACT.md.
	name, outcome, client string
}

// outcomes is the table, in the order in which rules are tried.
var outcomes = []rule{
	{name: "not sent", certainty: NotSent, verdict: Retry, failure: true,
		outcome: "not sent: the dial, DNS, the TLS handshake or a proxy's CONNECT failed, as net/http's connection trace shows (when a `Base` hides the trace, only an error whose type shows it)",
		client:  "retries, any method"},
	{name: "ambiguous", certainty: Ambiguous, verdict: Retry, safeOnly: true, failure: true, acted: true,
		outcome: "ambiguous: sent, no complete response (timeout, reset, EOF, a body cut short)",
		client:  "retries when the request has a key or an idempotent method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE); otherwise `ErrOutcomeUnknown`"},
	{name: "408, 429", certainty: Responded, codes: []int{408, 429}, verdict: Retry, safeOnly: true,
		outcome: "408, 429",
		client:  "retries (keyed or idempotent), honouring `Retry-After`; after the last attempt returns the response, unless an earlier attempt may have acted: then `ErrAttemptsExhausted`, matching `ErrOutcomeUnknown`"},
	{name: "409 key-in-flight", certainty: Responded, codes: []int{409}, problem: wire.ProblemKeyInFlight, verdict: InFlight, acted: true,
		outcome: "409 `key-in-flight`",
		client:  "waits `Retry-After`, retries with the same key; after the last attempt `ErrKeyInFlight`, matching `ErrOutcomeUnknown`"},
	{name: "409 outcome-uncertain", certainty: Responded, codes: []int{409}, problem: wire.ProblemOutcomeUncertain, verdict: Fail,
		reason: ErrOutcomeUncertain, acted: true,
		outcome: "409 `outcome-uncertain`", client: "never retries: `ErrOutcomeUncertain`, matching `ErrOutcomeUnknown` (an operator settles it; never re-send under a new key)"},
	{name: "422 key-reused", certainty: Responded, codes: []int{422}, problem: wire.ProblemKeyReused, verdict: Fail, reason: ErrKeyReused,
		outcome: "422 `key-reused`", client: "never retries: `ErrKeyReused`"},
	{name: "400 key-missing", certainty: Responded, codes: []int{400}, problem: wire.ProblemKeyMissing, verdict: Fail, reason: ErrKeyMissing,
		outcome: "400 `key-missing`", client: "never retries: `ErrKeyMissing`"},
	{name: "400 key-invalid", certainty: Responded, codes: []int{400}, problem: wire.ProblemKeyInvalid, verdict: Fail, reason: ErrKeyInvalid,
		outcome: "400 `key-invalid`", client: "never retries: `ErrKeyInvalid`"},
	{name: "500 result-unavailable", certainty: Responded, codes: []int{500}, problem: wire.ProblemResultUnavailable, verdict: Fail,
		reason: ErrResultUnavailable, acted: true,
		outcome: "500 `result-unavailable`", client: "never retries: `ErrResultUnavailable` (the operation took effect)"},
	{name: "500, 502, 503, 504", certainty: Responded, codes: []int{500, 502, 503, 504}, verdict: Retry, safeOnly: true, failure: true, acted: true,
		outcome: "500, 502, 503, 504",
		client:  "retries (keyed or idempotent), honouring `Retry-After`; after the last attempt returns the response, unless an earlier attempt may have acted: then `ErrAttemptsExhausted`, matching `ErrOutcomeUnknown`"},
	{name: "another 5xx", certainty: Responded, lo: 500, hi: 599, verdict: Stop, acted: true,
		outcome: "another 5xx", client: "returns it"},
	{name: "any other response", certainty: Responded, lo: 0, hi: 999, verdict: Stop,
		outcome: "any other response", client: "returns it"},
}

// classify returns the first rule that covers an attempt's outcome.
func classify(certainty Certainty, status int, problem string) *rule {
	if certainty == Responded && problem == "" && status >= 0 && status < len(plainStatuses) {
		return plainStatuses[status]
	}
	return firstRule(certainty, status, problem)
}

// plainStatuses holds the rule of each status without a problem, looked up
// in the table once, so that classifying the common response costs an
// index.
var plainStatuses = func() (rules [600]*rule) {
	for code := range rules {
		rules[code] = firstRule(Responded, code, "")
	}
	return rules
}()

// firstRule scans the table for the first rule that covers an outcome.
func firstRule(certainty Certainty, status int, problem string) *rule {
	for i := range outcomes {
		r := &outcomes[i]
		if r.covers(certainty, status, problem) {
			return r
		}
	}
	panic("idem: the outcome table has no rule for every outcome") // the last row covers all
}

func (r *rule) covers(certainty Certainty, status int, problem string) bool {
	switch {
	case r.certainty != certainty:
		return false
	case certainty != Responded:
		return true
	case r.problem != "" && r.problem != problem:
		return false
	case r.codes == nil:
		return r.lo <= status && status <= r.hi
	}
	for _, code := range r.codes {
		if code == status {
			return true
		}
	}
	return false
}

// problemStatuses holds the statuses that the table names: a problem
// document with one of them is read ahead, to learn its name.
var problemStatuses = func() (set [600]bool) {
	for _, r := range outcomes {
		for _, code := range r.codes {
			set[code] = true
		}
	}
	return set
}()

// namedStatus reports whether the table names code, so that a problem
// document with it may change the verdict.
func namedStatus(code int) bool {
	return code >= 0 && code < len(problemStatuses) && problemStatuses[code]
}

// notSentRule is the rule of an attempt that was never sent.
var notSentRule = classify(NotSent, 0, "")

// isIdempotent reports whether RFC 9110 defines method as idempotent: an
// ambiguous attempt of such a request may be retried without a key.
func isIdempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}
