package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// ProblemContentType is the media type of an RFC 9457 problem document.
const ProblemContentType = "application/problem+json"

// DefaultProblemPrefix is prepended to a problem name to form its type URI.
const DefaultProblemPrefix = "urn:idem:problem:"

// Problem names of the contract. The client matches on the name, never on
// the prefix, which a server may configure.
const (
	ProblemKeyInFlight       = "key-in-flight"
	ProblemKeyReused         = "key-reused"
	ProblemKeyMissing        = "key-missing"
	ProblemKeyInvalid        = "key-invalid"
	ProblemResultUnavailable = "result-unavailable"
	// ProblemOutcomeUncertain is the 409 of an operation whose outcome no
	// one could tell, which waits for an operator (StateUncertain).
	ProblemOutcomeUncertain = "outcome-uncertain"
)

// Problem is an RFC 9457 problem document with the contract's extension
// members: retry_after (seconds), sent with 409 key-in-flight, and the
// operation's outcome (operation_state, operation_ref, safe_new_key; see
// HeaderOperationState), which the server sets on every problem it writes.
type Problem struct {
	Type           string `json:"type"`
	Title          string `json:"title"`
	Status         int    `json:"status"`
	Detail         string `json:"detail,omitempty"`
	RetryAfter     int64  `json:"retry_after,omitempty"`
	OperationState string `json:"operation_state,omitempty"`
	OperationRef   string `json:"operation_ref,omitempty"`
	SafeNewKey     *bool  `json:"safe_new_key,omitempty"`
}

// Name returns the problem name: the part of Type after its last ':' or '/'.
func (p Problem) Name() string {
	return ProblemName(p.Type)
}

// ProblemName returns the part of a problem type URI after its last ':' or
// '/', so that "urn:idem:problem:key-reused" and
// "https://api.example.com/problems/key-reused" both name "key-reused".
func ProblemName(typ string) string {
	return typ[strings.LastIndexAny(typ, ":/")+1:]
}

// WriteProblem writes p as an application/problem+json response with
// status p.Status. The caller sets any other header (Retry-After) first.
// Its text is not HTML-escaped: a problem document is JSON for programs
// and people, never embedded in HTML, and "<tenant>" reads better than
// "\u003ctenant\u003e".
func WriteProblem(w http.ResponseWriter, p Problem) {
	body := encodeProblem(p)
	w.Header().Set("Content-Type", ProblemContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// encodeProblem is p as JSON, without HTML escapes and without the
// trailing newline of json.Encoder.
func encodeProblem(p Problem) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p) // a struct of strings and ints cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// ReadProblem decodes a problem document from at most limit bytes of r. It
// returns false when the media type is not a problem or the body does not
// decode.
func ReadProblem(contentType string, r io.Reader, limit int64) (Problem, bool) {
	if !IsProblem(contentType) {
		return Problem{}, false
	}
	var p Problem
	if err := json.NewDecoder(io.LimitReader(r, limit)).Decode(&p); err != nil {
		return Problem{}, false
	}
	return p, true
}

// IsProblem reports whether a Content-Type value names a problem document.
func IsProblem(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), ProblemContentType)
}
