package mysqlidem

import "sync"

// localClaims are the scopes whose Transactional attempts run on this
// store now, each holding a connection and its row lock: a claim that gets
// no connection within the wait bound and whose scope is here is a
// duplicate (409 key-in-flight); any other gets 503 store-unavailable.
type localClaims struct {
	mu     sync.Mutex
	scopes map[[32]byte]int
}

func (l *localClaims) add(scope [32]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.scopes == nil {
		l.scopes = make(map[[32]byte]int)
	}
	l.scopes[scope]++
}

func (l *localClaims) remove(scope [32]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.scopes[scope]--; l.scopes[scope] <= 0 {
		delete(l.scopes, scope)
	}
}

func (l *localClaims) has(scope [32]byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.scopes[scope] > 0
}
