package main

import (
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// A short storm: without a budget every operation makes all its attempts;
// with one, nothing is answered, so nothing is earned, and the retries stay
// within the floor's allowance, the retries that find no token waiting for
// one until their deadline.
func TestRunStorm(t *testing.T) {
	const ops, rate = 50, 1000
	s := scenarios()
	none := run(s[0], ops, rate, 10*time.Second)
	if none.requests != idem.DefaultMaxAttempts*ops {
		t.Errorf("no budget: %d requests for %d operations, want %d", none.requests, ops, idem.DefaultMaxAttempts*ops)
	}
	budgeted := run(s[1], ops, rate, time.Second)
	// The floor's burst of 10 and 10/s over the run.
	bound := int64(ops + 10 + 10*int(budgeted.elapsed.Seconds()+1))
	if budgeted.requests > bound || budgeted.denied == 0 {
		t.Errorf("default budget: %d requests (%d denials) for %d operations, want at most %d and some denials",
			budgeted.requests, budgeted.denied, ops, bound)
	}
}
