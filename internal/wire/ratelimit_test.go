package wire

import (
	"testing"
	"time"
)

func TestParseRetryAfterMs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"250", 250 * time.Millisecond, true},
		{" 12.5 ", 12500 * time.Microsecond, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{"NaN", 0, false},
		{"1e30", time.Duration(maxDelta) * time.Second, true},
	} {
		got, ok := ParseRetryAfterMs(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfterMs(%q) = %s, %v; want %s, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseRateLimit(t *testing.T) {
	for _, tc := range []struct {
		limit, policy string
		want          RateLimit
		ok            bool
	}{
		{`"default";r=120;t=1`, `"default";q=500;w=1`, RateLimit{120, time.Second, 500, time.Second}, true},
		{`"a";r=0;t=30, "b";r=5;t=1`, ``, RateLimit{0, 30 * time.Second, 0, 0}, true},
		{`"default"; r=3 ;t=2`, `"default";q=10`, RateLimit{3, 2 * time.Second, 0, 0}, true},
		{`"default";r=3`, `"default";q=10;w=1`, RateLimit{}, false},
		{`"default";r=-1;t=1`, ``, RateLimit{}, false},
		{``, ``, RateLimit{}, false},
	} {
		got, ok := ParseRateLimit(tc.limit, tc.policy)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRateLimit(%q, %q) = %+v, %v; want %+v, %v", tc.limit, tc.policy, got, ok, tc.want, tc.ok)
		}
	}
}
