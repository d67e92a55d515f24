package testserver

import (
	"sort"
	"sync"
)

// OutcomeKind is what a client concluded about an operation.
type OutcomeKind int

// The outcomes a client can conclude.
const (
	// OutcomeOK: the operation succeeded, with a result.
	OutcomeOK OutcomeKind = iota + 1
	// OutcomeFailed: the operation definitely did not take effect (for
	// example a 4xx rejection of the request, or an error the client knows
	// happened before the request was sent).
	OutcomeFailed
	// OutcomeUnknown: the client cannot tell (a timeout or a broken
	// connection after the request was sent, retries exhausted).
	OutcomeUnknown
)

// String returns "ok", "failed" or "unknown".
func (k OutcomeKind) String() string {
	switch k {
	case OutcomeOK:
		return "ok"
	case OutcomeFailed:
		return "failed"
	case OutcomeUnknown:
		return "unknown"
	}
	return "invalid"
}

// Outcome is the client's conclusion about one operation.
type Outcome struct {
	// Op is the operation id.
	Op string
	// Kind is what the client concluded.
	Kind OutcomeKind
	// Result is the result the client received ([OutcomeOK] only).
	Result string
	// Detail says why, for failures and unknown outcomes (the error text).
	Detail string
}

// History records the client side: one [Outcome] per operation the client
// started. Recording a second outcome for an operation replaces the first
// (a client's final word counts). The zero History is empty and ready; it
// is safe for concurrent use.
type History struct {
	mu       sync.Mutex
	outcomes map[string]Outcome
}

// OK records that op succeeded with result (an empty result is not
// compared by [Check]).
func (h *History) OK(op, result string) {
	h.record(Outcome{Op: op, Kind: OutcomeOK, Result: result})
}

// Failed records that op definitely did not take effect, because of err
// (nil is allowed).
func (h *History) Failed(op string, err error) {
	h.record(Outcome{Op: op, Kind: OutcomeFailed, Detail: errText(err)})
}

// Unknown records that the client cannot tell whether op took effect,
// because of err (nil is allowed).
func (h *History) Unknown(op string, err error) {
	h.record(Outcome{Op: op, Kind: OutcomeUnknown, Detail: errText(err)})
}

func (h *History) record(o Outcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.outcomes == nil {
		h.outcomes = make(map[string]Outcome)
	}
	h.outcomes[o.Op] = o
}

// Outcomes returns every recorded outcome, sorted by operation id.
func (h *History) Outcomes() []Outcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Outcome, 0, len(h.outcomes))
	for _, o := range h.outcomes {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Op < out[j].Op })
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
