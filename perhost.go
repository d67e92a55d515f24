package idem

import "sync"

// maxHostStates bounds how many hosts a perHost keeps.
const maxHostStates = 1024

// perHost holds one state of type T (a pacer, a limiter) for each host a
// client sends to, at most maxHostStates of them: when full, it forgets
// them all. A forgotten host's state is made again on its next request
// (a pacer's quota is announced again, a limiter starts anew); a call that
// holds the old state keeps it until it is done.
type perHost[T any] struct {
	mu    sync.Mutex
	hosts map[string]*T
}

// get returns host's state, made by newT when host has none; nil when it
// has none and newT is nil.
func (p *perHost[T]) get(host string, newT func() *T) *T {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.hosts[host]
	if s == nil && newT != nil {
		if len(p.hosts) >= maxHostStates || p.hosts == nil {
			p.hosts = map[string]*T{}
		}
		s = newT()
		p.hosts[host] = s
	}
	return s
}
