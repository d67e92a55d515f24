package model

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	if err := os.WriteFile(filepath.Join(dir, "idem.pml"), source, 0o644); err != nil {
		tb.Fatal(err)
	}
	args := append(defines(cfg), fmt.Sprintf("-n%d", seed), fmt.Sprintf("-u%d", steps), "idem.pml")
	return events(run(tb, context.Background(), dir, spin, args...))
}
