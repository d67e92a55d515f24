package main

import (
	"net/http"
	"testing"
	"time"
)

// The brownout's draws fail 40% of attempts, independently of the
// operation and the attempt: a client with n attempts completes 1-0.4^n.
func TestBrownoutDraws(t *testing.T) {
	var brownout scenario
	for _, sc := range scenarios(1) {
		if sc.name == "brownout" {
			brownout = sc
		}
	}
	const ops = 20000
	failedAt := make([]int, 6)
	allFailed := 0
	for op := range ops {
		all := true
		for attempt := 1; attempt <= 5; attempt++ {
			fail, ra := brownout.fault(op, attempt, 0)
			if ra != "1" {
				t.Fatalf("Retry-After %q, want 1", ra)
			}
			if fail {
				failedAt[attempt]++
			} else {
				all = false
			}
		}
		if all {
			allFailed++
		}
	}
	for attempt := 1; attempt <= 5; attempt++ {
		if share := float64(failedAt[attempt]) / ops; share < 0.38 || share > 0.42 {
			t.Errorf("attempt %d failed %.3f of operations, want 0.4", attempt, share)
		}
	}
	if share := float64(allFailed) / ops; share < 0.007 || share > 0.014 {
		t.Errorf("%.4f of operations failed all 5 attempts, want about 0.4^5 = 0.0102", share)
	}
}

func TestQuantileAndMedian(t *testing.T) {
	sorted := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := quantile(sorted, 0.5); got != 5 {
		t.Errorf("quantile(0.5) = %d, want 5", got)
	}
	if got := quantile(sorted, 0.99); got != 10 {
		t.Errorf("quantile(0.99) = %d, want 10", got)
	}
	if got := median([]int{3, 1, 2}); got != 2 {
		t.Errorf("median = %d, want 2", got)
	}
}

// Scenarios and clients are named on the command line by their slugs; an
// unknown name is refused.
func TestSelectByName(t *testing.T) {
	if got := slug("idem, no breaker, fail-fast"); got != "idem-no-breaker-fail-fast" {
		t.Errorf("slug = %q", got)
	}
	cs, err := selectedClients(clients(), "idem-no-breaker,go-retryablehttp")
	if err != nil || len(cs) != 2 || cs[0].name != "idem, no breaker" {
		t.Errorf("selectedClients = %v, %v", cs, err)
	}
	if _, err := selectedClients(clients(), "curl"); err == nil {
		t.Error("an unknown client was accepted")
	}
	if _, err := selected(scenarios(1), "blip-without-retry-after,typo"); err == nil {
		t.Error("an unknown scenario was accepted")
	}
}

// The overload offers 2,000 operations a second for 6 s, then 500 a
// second for 4 s: 14,000 operations, started in order, the second phase
// from 6 s.
func TestOverloadStarts(t *testing.T) {
	var overload scenario
	for _, sc := range scenarios(1) {
		if sc.name == "overload" {
			overload = sc
		}
	}
	starts := overload.starts()
	if len(starts) != 14000 {
		t.Fatalf("%d operations, want 14000", len(starts))
	}
	for i := 1; i < len(starts); i++ {
		if starts[i] < starts[i-1] {
			t.Fatalf("operation %d starts at %s, before %s", i, starts[i], starts[i-1])
		}
	}
	if got := starts[12000]; got != 6*time.Second {
		t.Errorf("the first operation of the second phase starts at %s, want 6s", got)
	}
	if got := starts[12001] - starts[12000]; got != 2*time.Millisecond {
		t.Errorf("the second phase starts one every %s, want 2ms", got)
	}
}

// The quota admits limit requests per window, says what is left and when
// the window resets on every response, and answers past it with a
// Retry-After of the window's end.
func TestQuotaAdmit(t *testing.T) {
	start := time.Unix(1000, 0)
	var s quotaState
	s.reset(&quota{limit: 2, window: time.Second}, start)
	steps := []struct {
		at         time.Duration
		ok         bool
		rateLimit  string
		retryAfter string
	}{
		{100 * time.Millisecond, true, `"default";r=1;t=1`, ""},
		{200 * time.Millisecond, true, `"default";r=0;t=1`, ""},
		{300 * time.Millisecond, false, `"default";r=0;t=1`, "1"},
		{1000 * time.Millisecond, true, `"default";r=1;t=1`, ""},
	}
	for _, st := range steps {
		h := http.Header{}
		if ok := s.admit(h, start.Add(st.at)); ok != st.ok {
			t.Errorf("at %s: admitted %v, want %v", st.at, ok, st.ok)
		}
		if got := h.Get("RateLimit"); got != st.rateLimit {
			t.Errorf("at %s: RateLimit %q, want %q", st.at, got, st.rateLimit)
		}
		if got := h.Get("Retry-After"); got != st.retryAfter {
			t.Errorf("at %s: Retry-After %q, want %q", st.at, got, st.retryAfter)
		}
		if got := h.Get("RateLimit-Policy"); got != `"default";q=2;w=1` {
			t.Errorf("RateLimit-Policy %q", got)
		}
	}
}
