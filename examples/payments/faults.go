package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/idemkit/idem/testserver"
)

// namedRates are the named values of -faults: the share of attempts that
// meet a fault.
var namedRates = map[string]float64{"none": 0, "light": 0.05, "default": 0.12, "heavy": 0.3}

// parseFaults reads -faults: a name of namedRates or a share from 0 to 1.
func parseFaults(s string) (float64, error) {
	if rate, ok := namedRates[s]; ok {
		return rate, nil
	}
	rate, err := strconv.ParseFloat(s, 64)
	if err != nil || rate < 0 || rate > 1 {
		return 0, fmt.Errorf("-faults %q: want a share from 0 to 1, or none, light, default or heavy", s)
	}
	return rate, nil
}

// chance is one fault of the mix, with its share of the faulted attempts.
type chance struct {
	share float64
	fault testserver.Fault
}

// mix is the demo's mix of faults, for a client whose attempts time out
// after attemptTimeout. More than half act after the payment committed:
// the failures that make a retry without a key pay twice.
func mix(attemptTimeout time.Duration) []chance {
	return []chance{
		{0.20, testserver.Fault{Kind: testserver.FaultDropClose}},
		{0.20, testserver.Fault{Kind: testserver.FaultDropReset}},
		{0.10, testserver.Fault{Kind: testserver.FaultStatusAfter, Status: 502}},
		{0.10, testserver.Fault{Kind: testserver.FaultPartialBody}},
		{0.10, testserver.Fault{Kind: testserver.FaultDelayResponse, Delay: 2 * attemptTimeout}},
		{0.15, testserver.Fault{Kind: testserver.FaultReset}},
		{0.15, testserver.Fault{Kind: testserver.FaultStatus, Status: 503, RetryAfter: time.Second}},
	}
}

// burstShare is the share of the fault rate given to 503 bursts: a
// payment whose first two attempts both get 503 with Retry-After.
const burstShare = 0.2

// faultRules returns the testserver rules of a run: 503 bursts for some
// payments, then the seeded mix for every attempt of every payment. Both
// depend only on the seed, the payment and the attempt, so the two
// clients meet the same faults.
func faultRules(seed uint64, rate float64, attemptTimeout time.Duration, ops []operation) []testserver.Rule {
	if rate == 0 {
		return nil
	}
	busy := testserver.Fault{Kind: testserver.FaultStatus, Status: 503, RetryAfter: time.Second}
	var rules []testserver.Rule
	for _, op := range ops {
		if testserver.Draw(seed, "503-burst", op.id, 0) < rate*burstShare {
			rules = append(rules, testserver.Rule{
				Name:   "503-burst",
				Match:  testserver.Match{Key: op.id, Attempt: testserver.Range{Max: 2}},
				Script: []testserver.Fault{busy, busy},
			})
		}
	}
	chaos := testserver.Rule{Name: "chaos", Match: testserver.Match{Method: "POST", Path: "/v1/payments"}}
	for _, c := range mix(attemptTimeout) {
		chaos.Mix = append(chaos.Mix, testserver.Chance{P: c.share * rate, Fault: c.fault})
	}
	return append(rules, chaos)
}
