package conformance

import (
	"context"
	"fmt"
	"strings"
)

// check is one entry of the battery.
type check struct {
	name     string
	required bool
	run      func(ctx context.Context, r *runner) Result
}

// checks is the battery, in the order it runs. Baseline comes first: the
// others need an operation that succeeds.
var checks = []check{
	{"baseline", true, checkBaseline},
	{"replay", true, checkReplay},
	{"body-mismatch", true, checkBodyMismatch},
	{"key-missing", true, checkKeyMissing},
	{"key-invalid", true, checkKeyInvalid},
	{"concurrent", true, checkConcurrent},
	{"scope", true, checkScope},
	{"faults", true, checkFaults},
	{"outcome", true, checkOutcome},
	{"equivalent-json", false, checkEquivalentJSON},
}

// CheckNames returns the names of the checks, in the order they run.
func CheckNames() []string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	return names
}

// selectChecks returns the checks named (all for nil), baseline always
// included, in battery order; an unknown name is an error that lists the
// valid ones.
func selectChecks(names []string) ([]check, error) {
	want := map[string]bool{checks[0].name: true}
	for _, n := range names {
		if !known(n) {
			return nil, fmt.Errorf("%w: unknown check %q (valid: %s)", ErrConfig, n, strings.Join(CheckNames(), ", "))
		}
		want[n] = true
	}
	var out []check
	for _, c := range checks {
		if names == nil || want[c.name] {
			out = append(out, c)
		}
	}
	return out, nil
}

func known(name string) bool {
	for _, c := range checks {
		if c.name == name {
			return true
		}
	}
	return false
}

// Run runs the configured checks against the endpoint, one after the
// other, and returns their results. ctx bounds the whole run: when it
// ends, the check in progress fails with its requests, and the remaining
// ones fail as not run. Run returns an error (wrapping ErrConfig or
// ErrHostNotAllowed) only for an invalid Config; whatever the endpoint
// does is in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	selected, _ := selectChecks(cfg.Checks)
	r := newRunner(cfg)
	defer r.close()
	rep := &Report{Method: r.cfg.Method, URL: r.cfg.URL, KeyHeader: r.cfg.KeyHeader,
		Effects: r.cfg.describeEffects(), Seed: r.cfg.Seed}
	for i, c := range selected {
		var res Result
		switch {
		case ctx.Err() != nil:
			res = failed(nil, "not run: the run's time was up (-timeout)")
		case i > 0 && rep.Results[0].Verdict == Fail:
			res = notApplicable("not run: baseline failed")
		default:
			res = c.run(ctx, r)
		}
		res.Name, res.Required = c.name, c.required
		if !c.required && res.Verdict == Fail {
			res.Verdict = Info
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// passed, failed and notApplicable build Results.
func passed(basis, format string, args ...any) Result {
	return Result{Verdict: Pass, Basis: basis, Detail: fmt.Sprintf(format, args...)}
}

func failed(evidence []Evidence, format string, args ...any) Result {
	return Result{Verdict: Fail, Detail: fmt.Sprintf(format, args...), Evidence: evidence}
}

func notApplicable(format string, args ...any) Result {
	return Result{Verdict: NotApplicable, Detail: fmt.Sprintf(format, args...)}
}

// first sends the first request of a new operation with key; when it does
// not succeed (2xx), res is the failed Result to return.
func (r *runner) first(ctx context.Context, key string, body []byte) (x exchange, res *Result) {
	x = r.send(ctx, call{note: "first request with a fresh key", key: key, body: body})
	if !x.ok2xx() {
		f := failed(r.evidenceOf(x), "the first request of an operation got %s; the check needs it to succeed", x.outcome())
		return x, &f
	}
	return x, nil
}

// effectProblem returns "" when the counter grew by want since t (or
// there is no counter), else a sentence that says by how much it grew.
func (r *runner) effectProblem(ctx context.Context, t tally, want int64) string {
	if !t.on {
		return ""
	}
	got, err := r.effects(ctx, t)
	switch {
	case err != nil:
		return "could not read the count: " + err.Error()
	case got != want:
		return fmt.Sprintf("the count grew by %d, want %d", got, want)
	}
	return ""
}
