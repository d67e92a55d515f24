package conformance

import "net/http"

// Verdict is the result of one check.
type Verdict string

// The verdicts.
const (
	// Pass: the endpoint kept the promise the check tests.
	Pass Verdict = "pass"
	// Fail: it broke it; the Result's Evidence shows how.
	Fail Verdict = "fail"
	// NotApplicable: the check could not run as configured (the Result's
	// Detail says what it needs), or its precondition failed.
	NotApplicable Verdict = "n/a"
	// Info: the check reports a behaviour on which APIs legitimately
	// differ; it never fails a run.
	Info Verdict = "info"
)

// Result is what one check found.
type Result struct {
	// Name is the check's name (see CheckNames).
	Name string `json:"name"`
	// Required is true for the checks whose failure fails the run.
	Required bool `json:"required"`
	// Verdict is the result.
	Verdict Verdict `json:"result"`
	// Detail says what was seen, in one sentence or two.
	Detail string `json:"detail"`
	// Basis says how effects were observed: "count", "ids", "bodies" or
	// "" when the check observes none.
	Basis string `json:"basis,omitempty"`
	// Evidence lists the exchanges (or, for faults, the operations) that
	// show a failure; for other verdicts it may be empty.
	Evidence []Evidence `json:"evidence,omitempty"`
}

// Evidence is one exchange with the endpoint, or one finding that is not
// an exchange (Request and Response empty, Note alone).
type Evidence struct {
	// Note says what this is ("first request", "the same key again").
	Note string `json:"note"`
	// Request is the request sent, nil for a finding.
	Request *RequestInfo `json:"request,omitempty"`
	// Response is what came back, nil for a finding.
	Response *ResponseInfo `json:"response,omitempty"`
}

// RequestInfo describes a request. It never holds the configured headers'
// values (credentials), only which principal sent it.
type RequestInfo struct {
	// Method and URL are the request's.
	Method string `json:"method"`
	URL    string `json:"url"`
	// Principal is "first" or "second".
	Principal string `json:"principal"`
	// Key is the key header's value; Keyless is true when none was sent.
	Key     string `json:"key,omitempty"`
	Keyless bool   `json:"keyless,omitempty"`
	// Body is the request body, cut at 512 bytes.
	Body string `json:"body,omitempty"`
}

// ResponseInfo describes a response, or the error that came instead.
type ResponseInfo struct {
	// Status is the response's status, 0 when none arrived.
	Status int `json:"status,omitempty"`
	// Replayed is the value of Config.ReplayedHeader, "" when absent.
	Replayed string `json:"replayed,omitempty"`
	// Header is the response's header, less Set-Cookie, Date and the
	// connection's fields.
	Header http.Header `json:"header,omitempty"`
	// Body is the response body, cut at 512 bytes.
	Body string `json:"body,omitempty"`
	// Error is the transport error, when no response arrived.
	Error string `json:"error,omitempty"`
}

// Report is the result of a run.
type Report struct {
	// Method, URL and KeyHeader name the endpoint checked.
	Method    string `json:"method"`
	URL       string `json:"url"`
	KeyHeader string `json:"key_header"`
	// Effects describes how effects were observed.
	Effects string `json:"effects"`
	// Seed is the seed of the faults.
	Seed uint64 `json:"seed"`
	// Results holds one Result per check run, in CheckNames order.
	Results []Result `json:"checks"`
}

// Passed reports whether no required check failed.
func (r *Report) Passed() bool {
	for _, res := range r.Results {
		if res.Required && res.Verdict == Fail {
			return false
		}
	}
	return true
}

// Result returns the result of the named check; ok is false when it did
// not run.
func (r *Report) Result(name string) (res Result, ok bool) {
	for _, res := range r.Results {
		if res.Name == name {
			return res, true
		}
	}
	return Result{}, false
}
