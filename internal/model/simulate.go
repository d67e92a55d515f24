package model

import (
	"context"
	"fmt"
	"testing"
)

// Simulate runs one random run of the model under cfg (spin's simulation,
// seeded by seed, at most steps steps) and returns its events: a history
// the model allows, for internal/trace's test that its transitions accept
// whatever the model does. It skips tb (fails it under CI=true) when spin
// is missing.
func Simulate(tb testing.TB, cfg Config, seed, steps int) []Event {
	tb.Helper()
	spin := spinPath(tb)
	dir := tb.TempDir()
	file := writeModel(tb, dir, cfg)
	args := append(defines(cfg), fmt.Sprintf("-n%d", seed), fmt.Sprintf("-u%d", steps), file)
	return events(run(tb, context.Background(), dir, spin, args...))
}
