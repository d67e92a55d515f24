package testserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCheckFindsEachViolation(t *testing.T) {
	cases := []struct {
		name    string
		effects [][2]string // op, result
		ok      map[string]string
		failed  []string
		unknown []string
		want    error // nil: no violation
		count   func(Report) int
	}{
		{name: "clean", effects: [][2]string{{"a", "r1"}}, ok: map[string]string{"a": "r1"}},
		{name: "double effect", effects: [][2]string{{"a", "r1"}, {"a", "r2"}}, ok: map[string]string{"a": "r2"},
			want: ErrDoubleEffect, count: func(r Report) int { return r.DoubleEffects }},
		{name: "lost ok", ok: map[string]string{"a": "r1"}, want: ErrLostOK, count: func(r Report) int { return r.LostOKs }},
		{name: "wrong result", effects: [][2]string{{"a", "r1"}}, ok: map[string]string{"a": "r9"},
			want: ErrWrongResult, count: func(r Report) int { return r.WrongResults }},
		{name: "empty result is not compared", effects: [][2]string{{"a", "r1"}}, ok: map[string]string{"a": ""}},
		{name: "failed but applied", effects: [][2]string{{"a", "r1"}}, failed: []string{"a"},
			want: ErrFailedApplied, count: func(r Report) int { return r.FailedApplied }},
		{name: "failed, not applied", failed: []string{"a"}},
		{name: "orphan effect", effects: [][2]string{{"ghost", "r1"}}, want: ErrOrphanEffect, count: func(r Report) int { return r.OrphanEffects }},
		{name: "effect without an id", effects: [][2]string{{"", "r1"}}, want: ErrOrphanEffect, count: func(r Report) int { return r.OrphanEffects }},
		{name: "unknown outcomes are not violations", effects: [][2]string{{"a", "r1"}}, unknown: []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var l Ledger
			var h History
			for _, e := range tc.effects {
				l.Record(e[0], e[1])
			}
			for op, res := range tc.ok {
				h.OK(op, res)
			}
			for _, op := range tc.failed {
				h.Failed(op, errors.New("402 declined"))
			}
			for _, op := range tc.unknown {
				h.Unknown(op, errors.New("timeout"))
			}
			r := Check(&l, &h)
			err := r.Err()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Check().Err() = %v, want nil\n%s", err, r)
				}
				return
			}
			if !errors.Is(err, tc.want) || len(r.Violations) != 1 || tc.count(r) != 1 {
				t.Fatalf("Check() = %d violations, err %v; want exactly one %v\n%s", len(r.Violations), err, tc.want, r)
			}
		})
	}
}

func TestCheckReportsUnknownOutcomes(t *testing.T) {
	var l Ledger
	var h History
	l.Record("u1", "r1")
	h.Unknown("u1", errors.New("read: connection reset by peer"))
	h.Unknown("u2", errors.New("context deadline exceeded"))
	h.OK("u2", "late") // the client's final word replaces the earlier one
	h.Unknown("u3", nil)
	r := Check(&l, &h)
	if r.Unknown != 2 || r.UnknownApplied != 1 || r.UnknownNotApplied != 1 || r.Operations != 3 {
		t.Fatalf("report %+v: want 2 unknowns, 1 applied, 3 operations", r)
	}
	if len(r.Unknowns) != 2 || r.Unknowns[0] != (Unresolved{Op: "u1", Effects: 1, Detail: "read: connection reset by peer"}) {
		t.Fatalf("Unknowns = %+v", r.Unknowns)
	}
	if r.LostOKs != 1 { // u2: ok without an effect
		t.Fatalf("LostOKs = %d, want 1", r.LostOKs)
	}
	s := r.String()
	for _, want := range []string{"operations: 3 (ok 1, failed 0, unknown 2)", "unknown outcomes: 1 took effect, 1 did not", `unknown "u1": took effect 1 times`} {
		if !strings.Contains(s, want) {
			t.Fatalf("String() = %q, want it to contain %q", s, want)
		}
	}
	if Check(nil, nil).Err() != nil {
		t.Fatal("Check(nil, nil) reported a violation")
	}
}

func TestReportStringIsBounded(t *testing.T) {
	var l Ledger
	for i := 0; i < 50; i++ {
		l.Record(fmt.Sprintf("op-%02d", i), "x")
	}
	s := Check(&l, nil).String()
	if !strings.Contains(s, "... and 30 more violations") || strings.Count(s, "\n") > 30 {
		t.Fatalf("String() of 50 violations = %q, want 20 listed and a count of the rest", s)
	}
}

// buggyClient sends one keyed POST and classifies the outcome with a rule
// of thumb that looks reasonable and is wrong.
func buggyClient(t *testing.T, s *Server, h *History, op string, classify func(*http.Response) OutcomeKind) {
	t.Helper()
	resp, body, err := post(freshClient(5*time.Second), s.URL+"/payments", op, "{}")
	if err != nil {
		h.Unknown(op, err)
		return
	}
	switch classify(resp) {
	case OutcomeOK:
		h.OK(op, paymentID(body))
	case OutcomeFailed:
		h.Failed(op, fmt.Errorf("status %d", resp.StatusCode))
	}
}

// paymentID extracts the payment id from the app's response ("" when the
// body is not the app's).
func paymentID(body []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &v)
	return v.ID
}

func TestCheckerCatchesRealRuns(t *testing.T) {
	t.Run("lying definite failure", func(t *testing.T) {
		// A client that takes any 5xx for "not done" is lied to by a 503
		// sent after the handler committed.
		a := &app{}
		s := startServer(t, a, Config{Rules: []Rule{Always(Match{}, Fault{Kind: FaultStatusAfter})}}, nil)
		var h History
		buggyClient(t, s, &h, "op-1", func(r *http.Response) OutcomeKind {
			if r.StatusCode >= 500 {
				return OutcomeFailed
			}
			return OutcomeOK
		})
		r := Check(&a.ledger, &h)
		if r.FailedApplied != 1 || !errors.Is(r.Err(), ErrFailedApplied) || len(r.Violations) != 1 {
			t.Fatalf("report:\n%s\nwant exactly one failed-but-applied violation", r)
		}
	})
	t.Run("lost ok", func(t *testing.T) {
		// A client that takes any response for success is fooled by a 503
		// sent before the handler ran.
		a := &app{}
		s := startServer(t, a, Config{Rules: []Rule{Always(Match{}, Fault{Kind: FaultStatus})}}, nil)
		var h History
		buggyClient(t, s, &h, "op-1", func(*http.Response) OutcomeKind { return OutcomeOK })
		r := Check(&a.ledger, &h)
		if r.LostOKs != 1 || !errors.Is(r.Err(), ErrLostOK) || len(r.Violations) != 1 {
			t.Fatalf("report:\n%s\nwant exactly one lost-ok violation", r)
		}
	})
	t.Run("double effect", func(t *testing.T) {
		// A handler without idempotency runs a keyed retry again.
		a := &app{}
		s := startServer(t, a, Config{Rules: []Rule{{Script: []Fault{{Kind: FaultDropClose}}}}}, nil)
		var h History
		for attempt := 0; attempt < 2; attempt++ {
			buggyClient(t, s, &h, "op-1", func(*http.Response) OutcomeKind { return OutcomeOK })
		}
		r := Check(&a.ledger, &h)
		if r.DoubleEffects != 1 || r.ExtraEffects != 1 || !errors.Is(r.Err(), ErrDoubleEffect) || len(r.Violations) != 1 {
			t.Fatalf("report:\n%s\nwant exactly one double effect", r)
		}
	})
}
