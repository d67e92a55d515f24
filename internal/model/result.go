package model

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Result is what pan reported for one run.
type Result struct {
	// States is the number of distinct states stored; Transitions the
	// transitions taken; Depth the longest path searched.
	States, Transitions int64
	Depth               int
	// Violation is pan's report of the first error ("assertion violated
	// (gowner==_pid)", "acceptance cycle"), empty when there is none.
	Violation string
	// Elapsed is pan's run time, without spin's and gcc's.
	Elapsed time.Duration
	// Output is pan's whole output.
	Output string

	cfg       Config
	dir, spin string
}

var (
	reSummary = regexp.MustCompile(`depth reached (\d+), errors: (\d+)`)
	reStored  = regexp.MustCompile(`(?m)^\s*(\d+) states, stored`)
	reTrans   = regexp.MustCompile(`(?m)^\s*(\d+) transitions`)
	reError   = regexp.MustCompile(`(?m)^pan:\d+: (.*?) \(at depth \d+\)`)
)

// parse reads pan's output. A search that stopped short of the whole state
// space for any reason but an error it found is an error of the run.
func parse(out string) (*Result, error) {
	for _, bad := range []string{"max search depth too small", "MEMLIM", "out of memory", "hash table is full"} {
		if strings.Contains(out, bad) {
			return nil, fmt.Errorf("pan did not search the whole state space (%s)", bad)
		}
	}
	sum := reSummary.FindStringSubmatch(out)
	stored := reStored.FindStringSubmatch(out)
	trans := reTrans.FindStringSubmatch(out)
	if sum == nil || stored == nil || trans == nil {
		return nil, errors.New("pan's output has no summary")
	}
	r := &Result{}
	r.Depth, _ = strconv.Atoi(sum[1])
	r.States, _ = strconv.ParseInt(stored[1], 10, 64)
	r.Transitions, _ = strconv.ParseInt(trans[1], 10, 64)
	errs, _ := strconv.Atoi(sum[2])
	if m := reError.FindStringSubmatch(out); m != nil {
		r.Violation = m[1]
	}
	switch {
	case errs > 0 && r.Violation == "":
		return nil, errors.New("pan reports an error it does not name")
	case errs == 0 && strings.Contains(out, "Search not completed"):
		return nil, errors.New("pan did not complete its search")
	}
	return r, nil
}

// properties name the assertions of idem.pml by the contract's words, as
// pan prints them.
var properties = []struct{ expr, name string }{
	{"(gowner==_pid)", "stale write"},
	{"(glease==0)", "live lease"},
	{"(rowlock==_pid)", "live lease"},
	{"!(gdone)", "completed"},
	{"(gans==0)", "one completion"},
	{"(rec.resp==fp)", "fingerprint"},
	{"(rec.fp==fp)", "fingerprint"},
	{"(rec.exp>rec.lease)", "lease margin"},
	{"(rec.state!=1)", "live lease"},
	{"!(guncertain)", "uncertain kept"},
	{"acceptance cycle", "settled"},
	{"(effects<=1)", "once"}, // outbox.pml
}

// Property names the property that Violation broke, "" when there is none.
func (r *Result) Property() string {
	if r.Violation == "" {
		return ""
	}
	for _, p := range properties {
		if strings.Contains(r.Violation, p.expr) {
			return p.name
		}
	}
	return "unknown: " + r.Violation
}

// Event is one step of a counterexample, as idem.pml prints it: "EV 5
// claim 1 claimed 1 0" is process 5's claim, with fingerprint 1, that won
// a first attempt and found no recovery point.
type Event struct {
	Pid  int
	Op   string
	Args []string
}

func (e Event) String() string {
	return fmt.Sprintf("%d %s %s", e.Pid, e.Op, strings.Join(e.Args, " "))
}

var reEvent = regexp.MustCompile(`^\s*EV (\d+) (\w+)(.*)$`)

// Trail replays the counterexample of a run that found one (spin -t) and
// returns its events, the last of which is the step that broke the
// property.
func (r *Result) Trail(tb testing.TB) []Event {
	tb.Helper()
	if r.Violation == "" {
		tb.Fatalf("%s: no counterexample to replay", r.cfg.Name)
	}
	out := run(tb, context.Background(), r.dir, r.spin, append(defines(r.cfg), "-t", r.cfg.file())...)
	return events(out)
}

// events are the EV lines of spin's output.
func events(out string) []Event {
	var evs []Event
	for _, line := range strings.Split(out, "\n") {
		m := reEvent.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		evs = append(evs, Event{Pid: pid, Op: m[2], Args: strings.Fields(m[3])})
	}
	return evs
}
