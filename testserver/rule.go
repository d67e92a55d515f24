package testserver

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Rule decides the fault of the requests it matches. Rules are tried in
// order and the first rule whose [Match] matches a request decides its fault,
// which may be none: later rules are not consulted.
//
// A rule is a script (Script non-empty: attempt n of an operation gets
// Script[n-1], later attempts pass) or a seeded mix (Mix: one uniform draw
// per request picks at most one [Chance]). A rule with neither passes the
// requests it matches, which is how a rule exempts them from later rules.
type Rule struct {
	// Name identifies the rule in the event log and in the seeded draw.
	// Empty means "#i", i being the rule's position (from 0): name the
	// rules whose draws must stay the same when rules are inserted before
	// them.
	Name string
	// Match selects the requests. The zero Match matches every request.
	Match Match
	// Script is the fault per attempt: attempt n gets Script[n-1] (a zero
	// [Fault] passes); attempts past the end pass.
	Script []Fault
	// Mix is a seeded mix, used when Script is empty: for each request
	// one number u in [0,1) is drawn from (seed, rule name, operation id,
	// attempt), and the first [Chance] whose cumulative P exceeds u applies.
	// The P must be in [0,1] and sum to at most 1; the rest passes.
	Mix []Chance
}

// Chance is one entry of a [Rule]'s Mix: [Fault] with probability P.
type Chance struct {
	// P is the probability, in [0,1].
	P float64
	// Fault is what happens when this chance is drawn.
	Fault Fault
}

// Always returns a rule that applies f to every request that m matches.
func Always(m Match, f Fault) Rule {
	return Rule{Match: m, Mix: []Chance{{P: 1, Fault: f}}}
}

// Match selects requests. Every non-zero field must match; the zero Match
// matches everything.
type Match struct {
	// Method matches the request method exactly (case-insensitive).
	// Empty matches any method.
	Method string
	// Path matches the URL path exactly, or as a prefix when it ends in
	// "*" ("/payments*"). Empty matches any path.
	Path string
	// Header requires each named header to be present with exactly that
	// value, or with any value when the value is empty.
	Header map[string]string
	// Key matches the operation id (the Idempotency-Key, or the
	// [Config.OperationHeader] value) exactly. Empty matches any.
	Key string
	// Attempt bounds the attempt number of the request's operation
	// (1 for the first request with its id).
	Attempt Range
	// Index bounds the global request index (1 for the first request the
	// server received). Index{Min: 10, Max: 19} is a burst.
	Index Range
	// From and Until bound the time since the rules were installed (by
	// [New], [NewProxy] or SetRules): the rule matches in [From, Until). Zero
	// Until means no end. An outage window is a status rule with both.
	From, Until time.Duration
}

// Range is an inclusive range of positive integers. Zero Min means no lower
// bound and zero Max no upper bound, so the zero Range matches everything.
type Range struct {
	// Min is the lowest value matched; zero means no lower bound.
	Min int
	// Max is the highest value matched; zero means no upper bound.
	Max int
}

// Contains reports whether n is in the range.
func (r Range) Contains(n int) bool {
	return (r.Min == 0 || n >= r.Min) && (r.Max == 0 || n <= r.Max)
}

// request is what rules see of a request.
type request struct {
	method, path string
	header       http.Header
	op           string
	attempt      int
	index        int
	since        time.Duration // since the rules were installed
}

// matches reports whether m selects q.
func (m Match) matches(q request) bool {
	if m.Method != "" && !strings.EqualFold(m.Method, q.method) {
		return false
	}
	if !matchPath(m.Path, q.path) || (m.Key != "" && m.Key != q.op) {
		return false
	}
	if !m.Attempt.Contains(q.attempt) || !m.Index.Contains(q.index) {
		return false
	}
	if q.since < m.From || (m.Until != 0 && q.since >= m.Until) {
		return false
	}
	for name, want := range m.Header {
		got, ok := q.header[http.CanonicalHeaderKey(name)]
		if !ok || (want != "" && (len(got) == 0 || got[0] != want)) {
			return false
		}
	}
	return true
}

func matchPath(pattern, path string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(path, prefix)
	}
	return pattern == "" || pattern == path
}

// ErrBadRule is wrapped by the errors that report an invalid [Rule].
var ErrBadRule = errors.New("testserver: invalid rule")

// Validate reports an error wrapping [ErrBadRule] (and [ErrBadFault] for a bad
// fault) when r cannot be applied.
func (r Rule) Validate() error {
	if len(r.Script) > 0 && len(r.Mix) > 0 {
		return fmt.Errorf("%w %q: has both a script and a mix", ErrBadRule, r.Name)
	}
	m := r.Match
	if m.Attempt.Min < 0 || m.Attempt.Max < 0 || m.Index.Min < 0 || m.Index.Max < 0 {
		return fmt.Errorf("%w %q: negative range bound", ErrBadRule, r.Name)
	}
	if m.From < 0 || m.Until < 0 || (m.Until != 0 && m.Until <= m.From) {
		return fmt.Errorf("%w %q: window [%s, %s) is empty or negative", ErrBadRule, r.Name, m.From, m.Until)
	}
	for i, f := range r.Script {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("%w %q: script[%d]: %w", ErrBadRule, r.Name, i, err)
		}
	}
	sum := 0.0
	for i, c := range r.Mix {
		if !(c.P >= 0 && c.P <= 1) {
			return fmt.Errorf("%w %q: mix[%d]: probability %v is not in [0,1]", ErrBadRule, r.Name, i, c.P)
		}
		if err := c.Fault.Validate(); err != nil {
			return fmt.Errorf("%w %q: mix[%d]: %w", ErrBadRule, r.Name, i, err)
		}
		sum += c.P
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("%w %q: mix probabilities sum to %v, more than 1", ErrBadRule, r.Name, sum)
	}
	return nil
}

// ValidateRules validates every rule and reports the first error.
func ValidateRules(rules []Rule) error {
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("rule %d: %w", i, err)
		}
	}
	return nil
}
