package testserver

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestAttemptsRestartAfterAnIdleHour(t *testing.T) {
	clk := newFakeClock()
	s := startServer(t, &app{}, Config{}, clk)
	c := freshClient(5 * time.Second)
	var got []int
	for i, idle := range []time.Duration{0, attemptMemory, attemptMemory + time.Second, time.Minute} {
		clk.Advance(idle)
		if _, _, err := post(c, s.URL, "k", ""); err != nil {
			t.Fatal(err)
		}
		got = append(got, waitEvents(t, s, i+1)[i].Attempt)
	}
	if want := []int{1, 2, 1, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("attempts after idle 0, 1h, 1h1s, 1m = %v, want %v", got, want)
	}
}

func TestAttemptCounterForgetsIdleOperations(t *testing.T) {
	var a attemptCounter
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := 0; i < 3*minSweep; i++ {
		if n := a.next(fmt.Sprint("old-", i), t0); n != 1 {
			t.Fatalf("next(old-%d) = %d, want 1", i, n)
		}
	}
	t1 := t0.Add(attemptMemory + time.Second)
	for i := 0; i < 10*minSweep; i++ {
		a.next(fmt.Sprint("new-", i%minSweep), t1)
	}
	for op := range a.ops {
		if strings.HasPrefix(op, "old-") {
			t.Fatalf("attempt counter still holds %q, idle for longer than %s", op, attemptMemory)
		}
	}
	if len(a.ops) != minSweep {
		t.Fatalf("attempt counter holds %d operations, want the %d active ones", len(a.ops), minSweep)
	}
	if n := a.next("new-0", t1); n != 11 {
		t.Fatalf("next(new-0) = %d, want 11: active operations keep their count across sweeps", n)
	}
}
