package testserver

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// rendezvous is a handler that proves two requests were inside it at the
// same time: each waits (at most 5s) for the other before answering.
type rendezvous struct {
	mu      sync.Mutex
	order   []string // "attempt n ctx-ok|ctx-done" in order of entry
	inside  chan struct{}
	overlap chan bool
}

func newRendezvous() *rendezvous {
	return &rendezvous{inside: make(chan struct{}, 2), overlap: make(chan bool, 2)}
}

func (h *rendezvous) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info, _ := InfoFrom(r.Context())
	h.mu.Lock()
	h.order = append(h.order, fmt.Sprintf("attempt %d ctx-err=%v", info.Attempt, r.Context().Err()))
	first := len(h.order) == 1
	h.mu.Unlock()
	if first {
		select {
		case <-h.inside:
			h.overlap <- true
		case <-time.After(5 * time.Second):
			h.overlap <- false
		}
	} else {
		h.inside <- struct{}{}
	}
	w.WriteHeader(http.StatusCreated)
}

func TestHoldUntilRetry(t *testing.T) {
	cases := []struct {
		name       string
		retryFirst bool
		want       string
	}{
		{"held first", false, "[attempt 1 ctx-err=<nil> attempt 2 ctx-err=<nil>]"},
		{"retry first", true, "[attempt 2 ctx-err=<nil> attempt 1 ctx-err=<nil>]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newRendezvous()
			rule := Rule{Script: []Fault{{Kind: FaultHold, RetryFirst: tc.retryFirst}}}
			s := startServer(t, h, Config{Rules: []Rule{rule}}, nil)

			// The client gives up on attempt 1, which the server holds.
			if _, _, err := post(freshClient(100*time.Millisecond), s.URL, "key-1", ""); !isTimeout(err) {
				t.Fatalf("attempt 1: error %v, want a timeout", err)
			}
			resp, _, err := post(freshClient(10*time.Second), s.URL, "key-1", "")
			if err != nil || resp.StatusCode != http.StatusCreated {
				t.Fatalf("attempt 2: %v, %v; want 201", resp, err)
			}
			events := waitEvents(t, s, 2)
			if !<-h.overlap {
				t.Fatal("the two attempts were never in the handler together")
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if got := fmt.Sprint(h.order); got != tc.want {
				t.Fatalf("handler entries = %s, want %s", got, tc.want)
			}
			for _, ev := range events {
				if !ev.HandlerRan || (ev.Attempt == 1) != (ev.Fault.Kind == FaultHold) {
					t.Fatalf("event %+v: want handler ran, hold on attempt 1 only", ev)
				}
			}
		})
	}
}

func TestHoldGivesUpWithoutRetry(t *testing.T) {
	clk := newFakeClock()
	a := &app{}
	s := startServer(t, a, Config{Rules: []Rule{Always(Match{}, Fault{Kind: FaultHold, Delay: time.Minute})}}, clk)
	done := make(chan error, 1)
	go func() {
		_, _, err := post(freshClient(10*time.Second), s.URL, "lonely", "")
		done <- err
	}()
	clk.waitTimers(t, 1)
	clk.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatalf("held request after the hold expired: %v, want a response", err)
	}
	ev := waitEvents(t, s, 1)[0]
	if !ev.HandlerRan || ev.Err == "" || a.calls.Load() != 1 {
		t.Fatalf("event %+v, calls %d: want the handler to run after the hold expired, with a note", ev, a.calls.Load())
	}
}

func TestCloseEndsEveryWait(t *testing.T) {
	faults := []Fault{
		{Kind: FaultBlackhole}, {Kind: FaultDropHang}, {Kind: FaultHold},
		{Kind: FaultDelay, Delay: time.Hour}, {Kind: FaultDelayResponse, Delay: time.Hour},
		{Kind: FaultSlowBody, Delay: time.Hour},
	}
	for _, f := range faults {
		t.Run(string(f.Kind), func(t *testing.T) {
			s := startServer(t, &app{}, Config{Rules: []Rule{Always(Match{}, f)}}, nil)
			errc := make(chan error, 1)
			go func() {
				_, _, err := post(freshClient(time.Minute), s.URL, "k", "")
				errc <- err
			}()
			waitArrivals(t, s, 1)
			closed := make(chan struct{})
			go func() { s.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not return within 10s")
			}
			if err := <-errc; err == nil {
				t.Fatal("client got no error from a server closed mid-fault")
			}
		})
	}
}

// waitArrivals waits (at most 10s) until n requests have been numbered.
func waitArrivals(t *testing.T, s *Server, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.log.waitArrived(ctx, n); err != nil {
		t.Fatalf("waiting for %d requests to arrive: %v", n, err)
	}
}
