// Package mystore stands for a store of the reader's own in
// docs/server.md's conformance snippet (internal/docs/tour's
// TestConformance), so that the snippet compiles.
package mystore

import (
	"time"

	"github.com/idemkit/idem/server"
)

// New stands for the reader's constructor: a store over namespace whose
// clock runs offset() ahead. It returns a [server.MemoryStore], which has
// no namespaces and its own clock.
func New(namespace string, offset func() time.Duration) server.Store {
	return server.NewMemoryStore()
}
