// Package testwait bounds the waits of the payments example's tests, so
// that a test that waits for an event that never comes fails instead of
// hanging.
package testwait

import (
	"testing"
	"time"
)

// Bound is how long Recv waits.
const Bound = 10 * time.Second

// Recv receives from c, failing the test when nothing arrives within
// Bound; what names the awaited event in the failure.
func Recv[T any](tb testing.TB, c <-chan T, what string) T {
	tb.Helper()
	timer := time.NewTimer(Bound)
	defer timer.Stop()
	select {
	case v := <-c:
		return v
	case <-timer.C:
		tb.Fatalf("%s: nothing within %v", what, Bound)
		panic("unreachable") // Fatalf does not return
	}
}
