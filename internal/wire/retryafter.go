package wire

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxDelta bounds a parsed delta-seconds so that the conversion to a
// time.Duration cannot overflow; callers clamp far lower.
const maxDelta = math.MaxInt64 / int64(time.Second)

// ParseRetryAfter parses a Retry-After field value, in delta-seconds ("120")
// or HTTP-date form, into a wait measured from now. A date in the past gives
// zero. ok is false when the value is empty or in neither form.
func ParseRetryAfter(value string, now time.Time) (wait time.Duration, ok bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if isDigits(value) {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n > maxDelta { // only overflow gets here
			n = maxDelta
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}

// FormatRetryAfter renders d as delta-seconds, rounded up, at least 1: a
// Retry-After of 0 would invite an immediate retry into the same state.
func FormatRetryAfter(d time.Duration) string {
	return strconv.FormatInt(RetryAfterSeconds(d), 10)
}

// RetryAfterSeconds is d in whole seconds, rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	if s < 1 {
		return 1
	}
	return s
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
