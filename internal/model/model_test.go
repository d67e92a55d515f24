package model

import (
	"testing"
)

// TestModel checks the model exhaustively within each Check's bounds: no
// assertion fails, and, for a Liveness check, no fair cycle breaks the
// ltl formula.
func TestModel(t *testing.T) {
	for _, cfg := range Checks {
		t.Run(cfg.Name, func(t *testing.T) {
			t.Parallel()
			r := Verify(t, cfg, false)
			t.Logf("%s: %d states, %d transitions, depth %d, %.1fs", cfg.Name, r.States, r.Transitions, r.Depth, r.Elapsed.Seconds())
			if r.Violation != "" {
				t.Errorf("%s: %s (%s); replay it with spin -t -p %v idem.pml\n%s", cfg.Name, r.Violation, r.Property(), defines(cfg), r.Output)
			}
		})
	}
}

// TestMutantsAreCaught runs each seeded mutant and requires spin to find a
// counterexample that breaks the property the mutant is meant to break.
func TestMutantsAreCaught(t *testing.T) {
	for _, m := range Mutants {
		t.Run(m.Name, func(t *testing.T) {
			t.Parallel()
			r := Verify(t, m.Config, !m.Liveness)
			if r.Violation == "" {
				t.Fatalf("%s: spin found no counterexample in %d states; the model cannot tell the mutant apart", m.Name, r.States)
			}
			evs := r.Trail(t)
			// The line says it is a mutant being caught: pan's "assertion
			// violated" in a CI log reads as a failure otherwise.
			t.Logf("mutant %s caught, as expected: spin found %s (%s) after %d states, %d events: %v", m.Name, r.Violation, r.Property(), r.States, len(evs), evs)
			if got := r.Property(); got != m.Breaks {
				t.Errorf("%s broke %q (%s), want %q", m.Name, got, r.Violation, m.Breaks)
			}
		})
	}
}
