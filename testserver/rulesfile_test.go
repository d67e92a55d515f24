package testserver

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	cases := []struct {
		in   string
		want Fault
	}{
		{"", Fault{}},
		{"none", Fault{}},
		{"drop-reset", Fault{Kind: FaultDropReset}},
		{"status;status=429;retry-after=2", Fault{Kind: FaultStatus, Status: 429, RetryAfter: 2 * time.Second}},
		{" status ; retry-after=1500ms ; date", Fault{Kind: FaultStatus, RetryAfter: 1500 * time.Millisecond, RetryAfterDate: true}},
		{"slow-body;bytes=4;delay=10ms", Fault{Kind: FaultSlowBody, Bytes: 4, Delay: 10 * time.Millisecond}},
		{"hold;delay=3s;retry-first", Fault{Kind: FaultHold, Delay: 3 * time.Second, RetryFirst: true}},
	}
	for _, tc := range cases {
		got, err := ParseFault(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if again, err := ParseFault(got.String()); err != nil || again != got {
			t.Errorf("ParseFault(%q.String() = %q) = %+v, %v; want the same fault", tc.in, got.String(), again, err)
		}
	}
	for _, bad := range []string{"explode", "status;status=abc", "status;status=200", "delay;delay=-1s", "drop-reset;color=red", "slow-body;bytes=-2",
		"status;date=false", "status;date=", "hold;retry-first=false", "hold;retry-first=0"} {
		if _, err := ParseFault(bad); !errors.Is(err, ErrBadFault) {
			t.Errorf("ParseFault(%q) error = %v, want ErrBadFault", bad, err)
		}
	}
}

func TestKinds(t *testing.T) {
	after := 0
	for _, k := range Kinds() {
		if !k.valid() {
			t.Errorf("kind %q is not valid", k)
		}
		if k.AfterHandler() {
			after++
		}
	}
	if len(Kinds()) != 14 || after != 7 {
		t.Fatalf("%d kinds, %d after the handler; want 14 and 7", len(Kinds()), after)
	}
	if got := KindList(); !strings.HasPrefix(got, "status, reset, close, ") || !strings.HasSuffix(got, ", status-after, hold") || strings.Count(got, ", ") != 13 {
		t.Fatalf("KindList() = %q, want the 14 kinds in documentation order", got)
	}
}

func TestParseRules(t *testing.T) {
	rules, err := ParseRules([]byte(`{"rules": [
	  {"name": "w", "match": {"method": "POST", "path": "/p*", "header": {"X-T": "a"}, "key": "k",
	    "attempt": {"min": 1, "max": 2}, "index": {"min": 3}, "from": "1s", "until": 2.5},
	   "script": [{"kind": "status", "status": 503, "retry_after": "2s", "retry_after_date": true},
	              {"kind": "hold", "delay": "100ms", "retry_first": true}, "none", {"kind": "partial-body", "bytes": 3}]},
	  {"mix": [{"p": 0.25, "fault": "drop-hang"}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{Name: "w", Match: Match{Method: "POST", Path: "/p*", Header: map[string]string{"X-T": "a"}, Key: "k",
			Attempt: Range{1, 2}, Index: Range{Min: 3}, From: time.Second, Until: 2500 * time.Millisecond},
			Script: []Fault{{Kind: FaultStatus, Status: 503, RetryAfter: 2 * time.Second, RetryAfterDate: true},
				{Kind: FaultHold, Delay: 100 * time.Millisecond, RetryFirst: true}, {}, {Kind: FaultPartialBody, Bytes: 3}}},
		{Mix: []Chance{{P: 0.25, Fault: Fault{Kind: FaultDropHang}}}},
	}
	if !reflect.DeepEqual(rules, want) {
		t.Fatalf("ParseRules =\n%+v\nwant\n%+v", rules, want)
	}
}

func TestParseRulesErrors(t *testing.T) {
	cases := map[string]string{
		"not json":       `{`,
		"unknown field":  `{"rules": [{"nmae": "x"}]}`,
		"unknown kind":   `{"rules": [{"script": ["explode"]}]}`,
		"bad duration":   `{"rules": [{"match": {"from": "soon"}}]}`,
		"bad fault key":  `{"rules": [{"script": [{"kind": "status", "code": 503}]}]}`,
		"p too large":    `{"rules": [{"mix": [{"p": 2, "fault": "reset"}]}]}`,
		"trailing data":  `{"rules": []} {}`,
		"range field":    `{"rules": [{"match": {"attempt": {"from": 1}}}]}`,
		"script and mix": `{"rules": [{"script": ["reset"], "mix": [{"p": 1, "fault": "reset"}]}]}`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseRules([]byte(in))
			if err == nil || !(errors.Is(err, ErrBadRule) || errors.Is(err, ErrBadFault)) {
				t.Fatalf("ParseRules(%s) error = %v, want ErrBadRule or ErrBadFault", in, err)
			}
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("empty error text")
			}
		})
	}
}
