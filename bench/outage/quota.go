package main

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// quota is a host's rate limit: limit requests per fixed window, announced
// on every response with the IETF RateLimit headers
// (draft-ietf-httpapi-ratelimit-headers), a request past it answered 429
// with Retry-After.
type quota struct {
	limit  int
	window time.Duration
}

// quotaState counts the requests of the current window.
type quotaState struct {
	mu     sync.Mutex
	q      *quota
	start  time.Time
	window int64 // the current window's number since start
	used   int
}

func (s *quotaState) reset(q *quota, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.q, s.start, s.window, s.used = q, start, 0, 0
}

// admit counts a request received at now against the quota, writes the
// RateLimit headers into h, and reports whether it is within the quota;
// when not, it also writes Retry-After (the window's end, in whole seconds,
// at least 1).
func (s *quotaState) admit(h http.Header, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	since := now.Sub(s.start)
	if w := int64(since / s.q.window); w != s.window {
		s.window, s.used = w, 0
	}
	reset := time.Duration(s.window+1)*s.q.window - since
	secs := int64((reset + time.Second - 1) / time.Second) // rounded up: the window may not have reset sooner
	ok := s.used < s.q.limit
	if ok {
		s.used++
	}
	h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, s.q.limit, int64(s.q.window/time.Second)))
	h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, s.q.limit-s.used, secs))
	if !ok {
		h.Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	}
	return ok
}
