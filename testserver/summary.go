package testserver

import (
	"fmt"
	"sort"
	"strings"
)

// Summary counts what an event log shows: the attempts on the wire and
// what the server did to them. It is built from a slice of events
// ([Summarize]) or one event at a time (Add, for example from
// [Config.OnEvent], which sees every event however few the server keeps).
type Summary struct {
	// Requests counts the events. Operations counts the operations whose
	// first attempt is among them (events with an operation id at attempt
	// 1): over every event of a run, the distinct operation ids. MaxAttempt
	// is the highest attempt number seen.
	Requests, Operations, MaxAttempt int
	// HandlerRuns counts requests whose handler ran (in a proxy: that
	// were, or may have been, sent upstream; see [Event.HandlerRan]).
	HandlerRuns int
	// Conns counts the connections whose first request is among the
	// events; Reused the requests that came on a connection that had
	// carried an earlier one.
	Conns, Reused int
	// Faults counts requests by the fault applied; [FaultNone] counts the
	// ones passed untouched.
	Faults map[FaultKind]int
	// Statuses counts requests by the status that went out (0: none).
	Statuses map[int]int
}

// Summarize counts events.
func Summarize(events []Event) Summary {
	s := Summary{Faults: make(map[FaultKind]int), Statuses: make(map[int]int)}
	for _, e := range events {
		s.Add(e)
	}
	return s
}

// Add counts one more event, in constant time and memory. The zero
// [Summary] is ready to use. Add is not safe for concurrent use: guard it
// (an OnEvent function is called from many requests at once).
func (s *Summary) Add(e Event) {
	if s.Faults == nil {
		s.Faults = make(map[FaultKind]int)
	}
	if s.Statuses == nil {
		s.Statuses = make(map[int]int)
	}
	s.Requests++
	if e.Op != "" && e.Attempt == 1 {
		s.Operations++
	}
	s.MaxAttempt = max(s.MaxAttempt, e.Attempt)
	if e.HandlerRan {
		s.HandlerRuns++
	}
	if e.Reused {
		s.Reused++
	} else {
		s.Conns++
	}
	s.Faults[e.Fault.Kind]++
	s.Statuses[e.Status]++
}

// String renders the summary in a few lines, faults in documentation
// order.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests: %d for %d operations (max attempt %d), handler ran %d times\n",
		s.Requests, s.Operations, s.MaxAttempt, s.HandlerRuns)
	fmt.Fprintf(&b, "connections: %d, requests on a reused connection: %d\n", s.Conns, s.Reused)
	b.WriteString("faults:")
	fmt.Fprintf(&b, " none %d", s.Faults[FaultNone])
	for _, row := range kindTable {
		if n := s.Faults[row.kind]; n > 0 {
			fmt.Fprintf(&b, ", %s %d", row.kind, n)
		}
	}
	b.WriteString("\nstatuses:")
	codes := make([]int, 0, len(s.Statuses))
	for c := range s.Statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	for i, c := range codes {
		sep := ","
		if i == 0 {
			sep = ""
		}
		label := fmt.Sprint(c)
		if c == 0 {
			label = "none"
		}
		fmt.Fprintf(&b, "%s %s %d", sep, label, s.Statuses[c])
	}
	b.WriteString("\n")
	return b.String()
}
