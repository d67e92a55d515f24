package main

import "time"

// scenario is one outage: a fault schedule and the open-loop load that
// meets it.
type scenario struct {
	name     string
	rate     int           // operations started per second
	duration time.Duration // how long operations are started
	deadline time.Duration // each operation's own
	// from, to bound the outage's window on the timeline (to 0: none).
	from, to time.Duration
	// fault says whether the attempt-th request (1-based) of operation op,
	// received at offset since the run started, is answered 503, and with
	// which Retry-After ("" for none).
	fault func(op, attempt int, offset time.Duration) (fail bool, retryAfter string)
}

// scenarios returns the four scenarios, in the order they run.
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
