package main

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Without jitter the clients retry in lockstep: one wins per round, so n
// clients make n + (n-1) + ... + 1 calls.
func TestSimulateNoJitterIsLockstep(t *testing.T) {
	b := idem.Backoff{Base: 10 * time.Millisecond, Cap: time.Second, Jitter: idem.NoJitter}
	calls, _ := simulate(20, time.Millisecond, b, rand.New(rand.NewPCG(1, 2)))
	if calls != 20*21/2 {
		t.Errorf("simulate(20 clients, no jitter) = %d calls, want %d", calls, 20*21/2)
	}
}

func TestSimulateIsDeterministicAndFullJitterHelps(t *testing.T) {
	b := idem.Backoff{Base: 10 * time.Millisecond, Cap: time.Second}
	c1, d1 := simulate(100, time.Millisecond, b, rand.New(rand.NewPCG(7, 0x1de)))
	c2, d2 := simulate(100, time.Millisecond, b, rand.New(rand.NewPCG(7, 0x1de)))
	if c1 != c2 || d1 != d2 {
		t.Fatalf("same seed: %d calls in %v, then %d in %v", c1, d1, c2, d2)
	}
	if c1 >= 100*101/4 {
		t.Errorf("full jitter: %d calls for 100 clients, want under half of lockstep's %d", c1, 100*101/2)
	}
}
