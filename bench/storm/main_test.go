package main

import (
	"testing"
)

// A short storm: without a budget every operation makes all its attempts;
// with one, retries stay within the budget's allowance.
func TestRunStorm(t *testing.T) {
	const ops, rate = 50, 1000
	s := scenarios()
	none := run(s[0], ops, rate)
	if none.requests != 4*ops {
		t.Errorf("no budget: %d requests for %d operations, want %d", none.requests, ops, 4*ops)
	}
	budgeted := run(s[1], ops, rate)
	// 0.1 per first attempt, plus the floor's burst of 10 and 10/s over the run.
	bound := int64(ops + ops/10 + 10 + 10*int(budgeted.elapsed.Seconds()+1))
	if budgeted.requests > bound || budgeted.denied == 0 {
		t.Errorf("default budget: %d requests (%d denials) for %d operations, want at most %d and some denials",
			budgeted.requests, budgeted.denied, ops, bound)
	}
}
