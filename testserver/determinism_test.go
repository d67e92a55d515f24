package testserver

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// chaosMix is a seeded mix of the faults that end at once (no waits), so
// that a run of many operations stays fast.
var chaosMix = []Chance{
	{P: 0.10, Fault: Fault{Kind: FaultStatus, RetryAfter: time.Second}},
	{P: 0.10, Fault: Fault{Kind: FaultReset}},
	{P: 0.10, Fault: Fault{Kind: FaultClose}},
	{P: 0.10, Fault: Fault{Kind: FaultDropReset}},
	{P: 0.10, Fault: Fault{Kind: FaultDropClose}},
	{P: 0.10, Fault: Fault{Kind: FaultPartialBody}},
	{P: 0.10, Fault: Fault{Kind: FaultStatusAfter, Status: 500}},
}

// runChaos sends ops operations, each retried with its key until a 201 or
// 5 attempts, from workers goroutines, and returns the fault of every
// (operation, attempt) from the event log.
func runChaos(t *testing.T, seed uint64, ops, workers int) map[string]FaultKind {
	t.Helper()
	s := startServer(t, &app{}, Config{Seed: seed, Rules: []Rule{{Name: "chaos", Mix: chaosMix}}}, nil)
	c := freshClient(5 * time.Second)
	keys := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range keys {
				for attempt := 0; attempt < 5; attempt++ {
					resp, _, err := post(c, s.URL, key, "{}")
					if err == nil && resp.StatusCode == http.StatusCreated {
						break
					}
				}
			}
		}()
	}
	for i := 0; i < ops; i++ {
		keys <- fmt.Sprintf("op-%03d", i)
	}
	close(keys)
	wg.Wait()
	s.Close() // every event is logged once Close returns
	got := make(map[string]FaultKind)
	for _, ev := range s.Events() {
		got[fmt.Sprintf("%s#%d", ev.Op, ev.Attempt)] = ev.Fault.Kind
	}
	return got
}

func TestSameSeedSameFaultsWhateverTheConcurrency(t *testing.T) {
	seed := Seed(t)
	const ops = 150
	serial := runChaos(t, seed, ops, 1)
	parallel := runChaos(t, seed, ops, 12)
	if len(serial) != len(parallel) {
		t.Fatalf("serial run had %d attempts, parallel %d; want the same", len(serial), len(parallel))
	}
	faulted := 0
	for k, f := range serial {
		if parallel[k] != f {
			t.Errorf("%s: serial fault %q, parallel %q", k, f, parallel[k])
		}
		if f != FaultNone {
			faulted++
		}
	}
	if faulted < ops/2 {
		t.Fatalf("only %d faulted attempts in %d: the mix did not apply", faulted, len(serial))
	}
	// And the faults are the ones Draw predicts.
	for k, f := range serial {
		var op string
		var attempt int
		fmt.Sscanf(k, "%6s#%d", &op, &attempt)
		if want := predict(seed, op, attempt); want != f {
			t.Fatalf("%s: fault %q, Draw predicts %q", k, f, want)
		}
	}
}

func predict(seed uint64, op string, attempt int) FaultKind {
	u, acc := Draw(seed, "chaos", op, attempt), 0.0
	for _, c := range chaosMix {
		acc += c.P
		if u < acc {
			return c.Fault.Kind
		}
	}
	return FaultNone
}

func TestOtherSeedOtherFaults(t *testing.T) {
	same := 0
	for i := 0; i < 100; i++ {
		op := fmt.Sprintf("op-%d", i)
		if predict(1, op, 1) == predict(2, op, 1) {
			same++
		}
	}
	if same > 60 {
		t.Fatalf("seeds 1 and 2 agree on %d of 100 operations, want them independent (~30)", same)
	}
}
