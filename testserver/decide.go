package testserver

import (
	"encoding/binary"
	"hash/fnv"
	"strconv"
	"time"
)

// ruleSet is an immutable list of rules with the time it was installed.
type ruleSet struct {
	rules []Rule
	names []string // the rule names used in the log and the draw
	since time.Time
}

func newRuleSet(rules []Rule, now time.Time) *ruleSet {
	rs := &ruleSet{rules: append([]Rule(nil), rules...), since: now}
	rs.names = make([]string, len(rules))
	for i, r := range rules {
		rs.names[i] = r.Name
		if r.Name == "" {
			rs.names[i] = "#" + strconv.Itoa(i)
		}
	}
	return rs
}

// decide returns the fault for q and the name of the rule that decided it
// ("" when no rule matched).
func (rs *ruleSet) decide(seed uint64, q request) (Fault, string) {
	for i, r := range rs.rules {
		if !r.Match.matches(q) {
			continue
		}
		return r.fault(seed, rs.names[i], q), rs.names[i]
	}
	return Fault{}, ""
}

// fault applies the rule's script or mix to q.
func (r Rule) fault(seed uint64, name string, q request) Fault {
	if len(r.Script) > 0 {
		if q.attempt >= 1 && q.attempt <= len(r.Script) {
			return r.Script[q.attempt-1]
		}
		return Fault{}
	}
	if len(r.Mix) == 0 {
		return Fault{}
	}
	u := Draw(seed, name, drawID(q), q.attempt)
	acc := 0.0
	for _, c := range r.Mix {
		acc += c.P
		if u < acc {
			return c.Fault
		}
	}
	return Fault{}
}

// drawID is the operation id the draw uses: a request without one is
// identified by its global index, so its draw depends on arrival order.
func drawID(q request) string {
	if q.op != "" {
		return q.op
	}
	return "\x00index:" + strconv.Itoa(q.index)
}

// Draw returns the uniform number in [0,1) that a Mix rule named rule draws
// for attempt of operation op under seed. It depends on nothing else, which
// is what makes seeded runs reproducible under any interleaving; it is
// exported so that tests and reports can predict a run's faults.
func Draw(seed uint64, rule, op string, attempt int) float64 {
	h := fnv.New64a()
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], seed)
	h.Write(buf[:])
	writeField(h, rule)
	writeField(h, op)
	binary.BigEndian.PutUint64(buf[:], uint64(attempt))
	h.Write(buf[:])
	return float64(mix64(h.Sum64())>>11) / (1 << 53)
}

// writeField writes s with its length, so that ("ab","c") and ("a","bc")
// hash differently.
func writeField(h interface{ Write([]byte) (int, error) }, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

// mix64 is the splitmix64 finaliser: FNV's low bits are weak, this spreads
// every input bit over the output.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
