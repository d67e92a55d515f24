package wire

import (
	"strconv"
	"strings"
	"time"
)

// Header fields of pushback besides Retry-After.
const (
	// HeaderRetryAfterMs is the wait in milliseconds that OpenAI's and
	// Anthropic's APIs send beside Retry-After; it is the more precise.
	HeaderRetryAfterMs = "Retry-After-Ms"
	// HeaderRateLimit and HeaderRateLimitPolicy are the IETF RateLimit
	// fields (draft-ietf-httpapi-ratelimit-headers): what is left of the
	// quota and when its window resets, and the quota itself.
	HeaderRateLimit       = "Ratelimit"
	HeaderRateLimitPolicy = "Ratelimit-Policy"
)

// ParseRetryAfterMs parses a retry-after-ms value: a non-negative number
// of milliseconds, possibly with a fraction. A value too large saturates
// at maxDelta seconds.
func ParseRetryAfterMs(value string) (time.Duration, bool) {
	ms, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
	if err != nil || ms < 0 || ms != ms {
		return 0, false
	}
	if ms/1000 > float64(maxDelta) {
		return time.Duration(maxDelta) * time.Second, true
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}

// RateLimit is the first quota a response's RateLimit fields announce.
type RateLimit struct {
	Remaining int           // r: requests left in the window
	Reset     time.Duration // t: until the window resets
	Quota     int           // q of RateLimit-Policy, 0 when not given
	Window    time.Duration // w of RateLimit-Policy, 0 when not given
}

// ParseRateLimit parses the RateLimit field (`"default";r=50;t=30`) and,
// when not empty, the RateLimit-Policy field (`"default";q=100;w=60`) of a
// response: the first item of each, the one a client of a single quota
// paces by. ok is false when RateLimit has no r and t.
func ParseRateLimit(limit, policy string) (rl RateLimit, ok bool) {
	p := firstItemParams(limit)
	r, rok := p["r"]
	t, tok := p["t"]
	if !rok || !tok {
		return RateLimit{}, false
	}
	rl = RateLimit{Remaining: r, Reset: time.Duration(t) * time.Second}
	pp := firstItemParams(policy)
	if q, w := pp["q"], pp["w"]; q > 0 && w > 0 {
		rl.Quota, rl.Window = q, time.Duration(w)*time.Second
	}
	return rl, true
}

// firstItemParams returns the non-negative integer parameters of the first
// item of a structured field list; others are left out.
func firstItemParams(field string) map[string]int {
	item, _, _ := strings.Cut(field, ",")
	parts := strings.Split(item, ";")
	out := make(map[string]int, len(parts))
	for _, p := range parts[1:] {
		k, v, found := strings.Cut(p, "=")
		if !found {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 || n > maxDelta {
			continue
		}
		out[strings.TrimSpace(k)] = int(n)
	}
	return out
}
