package testserver

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"
)

func TestMatch(t *testing.T) {
	q := request{
		method: "POST", path: "/payments/42", op: "k1", attempt: 2, index: 7,
		header: http.Header{"X-Tenant": {"acme"}}, since: 3 * time.Second,
	}
	cases := []struct {
		name string
		m    Match
		want bool
	}{
		{"zero", Match{}, true},
		{"method", Match{Method: "post"}, true},
		{"other method", Match{Method: "GET"}, false},
		{"exact path", Match{Path: "/payments/42"}, true},
		{"path prefix", Match{Path: "/payments/*"}, true},
		{"other path", Match{Path: "/payments"}, false},
		{"key", Match{Key: "k1"}, true},
		{"other key", Match{Key: "k2"}, false},
		{"attempt", Match{Attempt: Range{Min: 2, Max: 2}}, true},
		{"attempt below", Match{Attempt: Range{Max: 1}}, false},
		{"index burst", Match{Index: Range{Min: 5, Max: 9}}, true},
		{"index after", Match{Index: Range{Min: 8}}, false},
		{"header value", Match{Header: map[string]string{"x-tenant": "acme"}}, true},
		{"header present", Match{Header: map[string]string{"X-Tenant": ""}}, true},
		{"header other value", Match{Header: map[string]string{"X-Tenant": "other"}}, false},
		{"header absent", Match{Header: map[string]string{"X-Other": ""}}, false},
		{"window", Match{From: 2 * time.Second, Until: 4 * time.Second}, true},
		{"window ended", Match{Until: 3 * time.Second}, false},
		{"window not begun", Match{From: 4 * time.Second}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.matches(q); got != tc.want {
				t.Fatalf("%+v.matches(q) = %v, want %v", tc.m, got, tc.want)
			}
		})
	}
}

func TestRuleValidate(t *testing.T) {
	cases := []struct {
		name string
		r    Rule
		want error
	}{
		{"script and mix", Rule{Script: []Fault{{}}, Mix: []Chance{{P: 1}}}, ErrBadRule},
		{"unknown kind", Always(Match{}, Fault{Kind: "explode"}), ErrBadFault},
		{"status 200", Always(Match{}, Fault{Kind: FaultStatus, Status: 200}), ErrBadFault},
		{"p above 1", Rule{Mix: []Chance{{P: 1.5}}}, ErrBadRule},
		{"p NaN", Rule{Mix: []Chance{{P: math.NaN()}}}, ErrBadRule},
		{"sum above 1", Rule{Mix: []Chance{{P: 0.6}, {P: 0.6}}}, ErrBadRule},
		{"empty window", Rule{Match: Match{From: time.Second, Until: time.Second}}, ErrBadRule},
		{"negative range", Rule{Match: Match{Attempt: Range{Min: -1}}}, ErrBadRule},
		{"negative delay", Rule{Script: []Fault{{Kind: FaultDelay, Delay: -1}}}, ErrBadFault},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.r.Validate(); !errors.Is(err, tc.want) {
				t.Fatalf("Validate() = %v, want %v", err, tc.want)
			}
		})
	}
	if err := (Rule{Mix: []Chance{{P: 0.3, Fault: Fault{Kind: FaultDropReset}}, {P: 0.7}}}).Validate(); err != nil {
		t.Fatalf("Validate(valid mix) = %v, want nil", err)
	}
}

func TestDrawIsUniformAndPure(t *testing.T) {
	if Draw(1, "r", "k", 1) != Draw(1, "r", "k", 1) {
		t.Fatal("Draw is not a function of its arguments")
	}
	distinct := map[float64]bool{}
	for _, args := range []struct {
		seed    uint64
		rule    string
		op      string
		attempt int
	}{{1, "r", "k", 1}, {2, "r", "k", 1}, {1, "s", "k", 1}, {1, "r", "j", 1}, {1, "r", "k", 2}, {1, "rk", "", 1}, {1, "", "rk", 1}} {
		distinct[Draw(args.seed, args.rule, args.op, args.attempt)] = true
	}
	if len(distinct) != 7 {
		t.Fatalf("Draw gave %d distinct values for 7 distinct tuples", len(distinct))
	}
	const n = 20000
	var buckets [10]int
	for i := 0; i < n; i++ {
		u := Draw(42, "mix", fmt.Sprintf("key-%d", i), 1+i%3)
		if u < 0 || u >= 1 {
			t.Fatalf("Draw = %v, want [0,1)", u)
		}
		buckets[int(u*10)]++
	}
	for i, c := range buckets {
		if c < n/10*8/10 || c > n/10*12/10 {
			t.Fatalf("bucket %d has %d of %d draws, want about %d", i, c, n, n/10)
		}
	}
}

func TestRulesFirstMatchDecides(t *testing.T) {
	rs := newRuleSet([]Rule{
		{Name: "exempt", Match: Match{Method: "GET"}},
		{Name: "script", Match: Match{Path: "/pay"}, Script: []Fault{{Kind: FaultDropReset}, {}, {Kind: FaultStatus}}},
		Always(Match{}, Fault{Kind: FaultDropClose}),
	}, time.Time{})
	cases := []struct {
		q        request
		want     FaultKind
		wantRule string
	}{
		{request{method: "GET", path: "/pay", attempt: 1}, FaultNone, "exempt"},
		{request{method: "POST", path: "/pay", attempt: 1}, FaultDropReset, "script"},
		{request{method: "POST", path: "/pay", attempt: 2}, FaultNone, "script"},
		{request{method: "POST", path: "/pay", attempt: 3}, FaultStatus, "script"},
		{request{method: "POST", path: "/pay", attempt: 4}, FaultNone, "script"},
		{request{method: "POST", path: "/other", attempt: 1}, FaultDropClose, "#2"},
	}
	for _, tc := range cases {
		f, rule := rs.decide(0, tc.q)
		if f.Kind != tc.want || rule != tc.wantRule {
			t.Errorf("decide(%s %s attempt %d) = %q by %q, want %q by %q", tc.q.method, tc.q.path, tc.q.attempt, f.Kind, rule, tc.want, tc.wantRule)
		}
	}
}

func TestScriptPerAttemptOverTheWire(t *testing.T) {
	rule := Rule{Script: []Fault{{Kind: FaultDropReset}, {Kind: FaultStatus, RetryAfter: time.Second}}}
	a := &app{}
	s := startServer(t, a, Config{Rules: []Rule{rule}}, nil)
	c := freshClient(5 * time.Second)
	var got []string
	for i := 0; i < 3; i++ {
		resp, _, err := post(c, s.URL, "key-a", "")
		if err != nil {
			got = append(got, "error")
			continue
		}
		got = append(got, fmt.Sprintf("%d retry-after=%s", resp.StatusCode, resp.Header.Get("Retry-After")))
	}
	want := []string{"error", "503 retry-after=1", "201 retry-after="}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("attempts saw %q, want %q", got, want)
	}
	// Another key starts its own script at attempt 1.
	if _, _, err := post(c, s.URL, "key-b", ""); !isReset(err) {
		t.Fatalf("first attempt of key-b: error %v, want ECONNRESET", err)
	}
	if n := a.calls.Load(); n != 3 {
		t.Fatalf("handler calls = %d, want 3 (drops run it, the 503 does not)", n)
	}
}

func TestBurstByIndexAndOutageWindow(t *testing.T) {
	clk := newFakeClock()
	rules := []Rule{
		{Name: "burst", Match: Match{Index: Range{Min: 2, Max: 3}}, Script: []Fault{{Kind: FaultStatus, Status: 502}}},
		Always(Match{From: time.Second, Until: 2 * time.Second}, Fault{Kind: FaultStatus, RetryAfter: time.Second}),
	}
	s := startServer(t, &app{}, Config{Rules: rules}, clk)
	c := freshClient(5 * time.Second)
	status := func() int {
		t.Helper()
		resp, _, err := post(c, s.URL, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	var got []int
	for i := 0; i < 4; i++ {
		got = append(got, status())
	}
	clk.Advance(time.Second)
	got = append(got, status(), status())
	clk.Advance(time.Second)
	got = append(got, status())
	want := []int{201, 502, 502, 201, 503, 503, 201}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses = %v, want %v", got, want)
	}
	// The log: which rule decided, which fault, and the handler ran only
	// for the requests let through.
	var log []string
	for _, ev := range waitEvents(t, s, len(want)) {
		log = append(log, fmt.Sprintf("%d:%s/%s/%d/ran=%v", ev.Index, ev.Rule, ev.Fault, ev.Status, ev.HandlerRan))
	}
	wantLog := []string{
		"1:/none/201/ran=true", "2:burst/status;status=502/502/ran=false", "3:burst/status;status=502/502/ran=false",
		"4:/none/201/ran=true", "5:#1/status;retry-after=1s/503/ran=false", "6:#1/status;retry-after=1s/503/ran=false",
		"7:/none/201/ran=true",
	}
	if fmt.Sprint(log) != fmt.Sprint(wantLog) {
		t.Fatalf("events:\n%v\nwant\n%v", log, wantLog)
	}
}
