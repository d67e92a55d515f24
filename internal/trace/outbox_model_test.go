package trace

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/model"
)

// The outbox model's bound, in ticks (outbox.pml's KEYRET default).
const outboxKeyRet = 3

// TestOutboxGuardsAcceptTheModel: every history of outbox.pml that spin's
// random simulation generates passes CheckOutbox. With
// TestOutboxGuardsRefuseTheMutants, this holds CheckOutbox's guards
// equal to the model's.
func TestOutboxGuardsAcceptTheModel(t *testing.T) {
	cfg := model.Config{Name: "outbox", File: "outbox.pml"}
	for seed := 1; seed <= 40; seed++ {
		evs := model.Simulate(t, cfg, seed, 2000)
		ds := deliveriesFromModel(evs)
		require.NotEmpty(t, ds, "seed %d: no delivery", seed)
		require.NoError(t, CheckOutbox(ds), "seed %d: the model allows %v", seed, evs)
	}
}

// TestOutboxGuardsRefuseTheMutants: the counterexample of each outbox
// mutant fails CheckOutbox (at the re-drive or the delivery the mutant let
// through).
func TestOutboxGuardsRefuseTheMutants(t *testing.T) {
	for _, name := range []string{"outbox-redrive-past-retention", "outbox-retry-past-retention", "outbox-redrive-new-key"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, ok := model.MutantNamed(name)
			require.True(t, ok)
			evs := model.Verify(t, m.Config, true).Trail(t)
			ds := deliveriesFromModel(evs)
			err := CheckOutbox(ds)
			require.Error(t, err, "the mutant's trail passed: %v", evs)
			t.Logf("%s: %v", name, err)
		})
	}
}

// deliveriesFromModel turns outbox.pml's events into the outbox's steps:
// a tick of its clock is an hour, each delivery may act (the model counts
// the retention from the first, whether or not it reached), and keys are
// the model's numbers.
func deliveriesFromModel(evs []model.Event) []Delivery {
	var out []Delivery
	now := time.Unix(0, 0)
	for _, e := range evs {
		d := Delivery{Message: "model", At: now, Started: now, Retention: outboxKeyRet * time.Hour}
		switch {
		case e.Op == "tick":
			now = now.Add(time.Hour)
			continue
		case e.Op == "deliver" && len(e.Args) == 2:
			d.Op, d.Key, d.Acted = "deliver", "k"+e.Args[1], true
		case e.Op == "redrive" && len(e.Args) == 0:
			d.Op = "redrive"
		case e.Op == "redrive":
			d.Op = "redrive-refused"
		default:
			continue
		}
		// steps within one tick keep their order
		now = now.Add(time.Nanosecond)
		out = append(out, d)
	}
	return out
}
