package testserver

import (
	"sort"
	"sync"
)

// Ledger records the business effects of operations: each time an
// operation really happened (a payment row written, a transfer booked),
// its operation id and result. A handler records effects live (see
// [InfoFrom] for the operation id), or a test records them after the run,
// for example from the rows in its database. The zero Ledger is empty and
// ready; it is safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	effects map[string]*Effect
}

// Effect is what a [Ledger] knows about one operation.
type Effect struct {
	// Op is the operation id ("" for effects that named none).
	Op string
	// Count is how many times the operation took effect.
	Count int
	// Results are the results of the effects, in recording order (for a
	// payment: the id of each payment row).
	Results []string
}

// Record records that operation op took effect once more, with result (an
// empty result is not compared by [Check]). An empty op records an effect
// that no operation claims, which Check reports.
func (l *Ledger) Record(op, result string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.effects == nil {
		l.effects = make(map[string]*Effect)
	}
	e, ok := l.effects[op]
	if !ok {
		e = &Effect{Op: op}
		l.effects[op] = e
	}
	e.Count++
	e.Results = append(e.Results, result)
}

// Effect returns the effects of op; Count is 0 when it never took effect.
func (l *Ledger) Effect(op string) Effect {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.effects[op]; ok {
		return e.clone()
	}
	return Effect{Op: op}
}

// Effects returns every operation that took effect, sorted by id.
func (l *Ledger) Effects() []Effect {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Effect, 0, len(l.effects))
	for _, e := range l.effects {
		out = append(out, e.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Op < out[j].Op })
	return out
}

func (e *Effect) clone() Effect {
	c := *e
	c.Results = append([]string(nil), e.Results...)
	return c
}
