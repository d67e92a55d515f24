package main

import "time"

// scenario is one outage: a fault schedule and the open-loop load that
// meets it.
type scenario struct {
	name     string
	rate     int           // operations started per second
	duration time.Duration // how long operations are started
	// then, when its rate is not 0, follows: then.rate operations a
	// second for then.duration (the overload's second phase).
	then     phase
	deadline time.Duration // each operation's own
	// capacity, when not nil, is the host's: it serves so many requests at
	// once behind a queue, and answers 503 Retry-After: 1 past it.
	capacity *capacity
	// quota, when not nil, is the host's rate limit (quota.go).
	quota *quota
	// after, when not 0, is the offset from which the operations started
	// are counted apart in the table ("ok started after").
	after time.Duration
	// from, to bound the outage's window on the timeline (to 0: none).
	from, to time.Duration
	// fault says whether the attempt-th request (1-based) of operation op,
	// received at offset since the run started, is answered 503, and with
	// which Retry-After ("" for none).
	fault func(op, attempt int, offset time.Duration) (fail bool, retryAfter string)
}

// phase is a stretch of the open-loop load.
type phase struct {
	rate     int
	duration time.Duration
}

// capacity is what a host can serve: slots requests at once, each for
// service, and queue more waiting for a slot (a request whose client left
// leaves the queue); a request past them is answered 503 at once.
type capacity struct {
	slots, queue int
	service      time.Duration
}

// starts returns the offset at which each operation of sc starts.
func (sc scenario) starts() []time.Duration {
	var out []time.Duration
	var from time.Duration
	for _, p := range []phase{{sc.rate, sc.duration}, sc.then} {
		n := int(p.duration.Seconds() * float64(p.rate))
		for op := range n {
			out = append(out, from+time.Duration(op)*time.Second/time.Duration(p.rate))
		}
		from += p.duration
	}
	return out
}

// scenarios returns the four scenarios (issue 26) and the
// overload (issue 41) and the quota (issue 47), in the order they run.
func scenarios(seed uint64) []scenario {
	blip := func(retryAfter string) func(int, int, time.Duration) (bool, string) {
		return func(_, _ int, at time.Duration) (bool, string) {
			return at >= 3*time.Second && at < 5500*time.Millisecond, retryAfter
		}
	}
	return []scenario{
		{name: "blip", rate: 400, duration: 9 * time.Second, deadline: 8 * time.Second,
			from: 3 * time.Second, to: 5500 * time.Millisecond, fault: blip("1")},
		{name: "blip without Retry-After", rate: 400, duration: 9 * time.Second, deadline: 8 * time.Second,
			from: 3 * time.Second, to: 5500 * time.Millisecond, fault: blip("")},
		{name: "storm", rate: 400, duration: 9 * time.Second, deadline: 2 * time.Second,
			from: 0, to: 9 * time.Second, fault: func(int, int, time.Duration) (bool, string) { return true, "" }},
		{name: "brownout", rate: 100, duration: 9 * time.Second, deadline: 8 * time.Second,
			fault: func(op, attempt int, _ time.Duration) (bool, string) {
				return draw(seed, op, attempt) < 0.4, "1"
			}},
		// A host at capacity (10 in service, 10 ms each: 1,000 a second,
		// a queue of 200), offered twice that for 6 s and half of it for
		// 4 s (issue 41, point 1).
		{name: "overload", rate: 2000, duration: 6 * time.Second, then: phase{500, 4 * time.Second},
			deadline: 2 * time.Second, capacity: &capacity{slots: 10, queue: 200, service: 10 * time.Millisecond},
			from: 0, to: 6 * time.Second, after: 6 * time.Second,
			fault: func(int, int, time.Duration) (bool, string) { return false, "" }},
		// A host allowing 500 requests per 1 s window, announced with the
		// RateLimit headers, 429 with Retry-After past it; offered 800
		// operations a second for 8 s (issue 47).
		{name: "quota", rate: 800, duration: 8 * time.Second, deadline: 3 * time.Second,
			quota: &quota{limit: 500, window: time.Second},
			fault: func(int, int, time.Duration) (bool, string) { return false, "" }},
	}
}

// draw returns a uniform number in [0, 1) fixed by (seed, op, attempt):
// every client meets the same failures at the same attempt of the same
// operation.
func draw(seed uint64, op, attempt int) float64 {
	x := mix(mix(seed^uint64(op)) ^ uint64(attempt))
	return float64(x>>11) / (1 << 53)
}

// mix is splitmix64's finaliser: every bit of x moves every bit of the
// result.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
