// Package localclaim counts the scopes whose Transactional attempts run on
// this process now, each holding a connection and its scope's lock, for
// the SQL stores (server's PostgresStore, mysqlidem): a request that gets
// no connection within the wait bound and whose scope is here is a
// duplicate (409 key-in-flight); any other gets 503 store-unavailable.
package localclaim

import "sync"

// Set is a count per scope. Each scope is counted, because a waiting
// duplicate can win the lock and add its claim before the attempt that
// released the lock removes its own. The zero Set is empty and ready; a
// Set is safe for concurrent use.
type Set struct {
	mu     sync.Mutex
	scopes map[[32]byte]int
}

// Add counts one more attempt of scope.
func (l *Set) Add(scope [32]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.scopes == nil {
		l.scopes = make(map[[32]byte]int)
	}
	l.scopes[scope]++
}

// Remove counts one attempt of scope less.
func (l *Set) Remove(scope [32]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.scopes[scope]--; l.scopes[scope] <= 0 {
		delete(l.scopes, scope)
	}
}

// Has reports whether an attempt of scope runs here.
func (l *Set) Has(scope [32]byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.scopes[scope] > 0
}
