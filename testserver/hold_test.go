package testserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// rendezvous is a handler that proves two requests were inside it at the
// same time: the first waits (at most 5s) for the second before answering.
type rendezvous struct {
	mu      sync.Mutex
	order   []string // "attempt n ctx-err=..." in order of entry
	entered chan int // the attempt of each entrant
	inside  chan struct{}
	overlap chan bool
}

func newRendezvous() *rendezvous {
	return &rendezvous{entered: make(chan int, 2), inside: make(chan struct{}, 2), overlap: make(chan bool, 2)}
}

func (h *rendezvous) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info, _ := InfoFrom(r.Context())
	h.mu.Lock()
	h.order = append(h.order, fmt.Sprintf("attempt %d ctx-err=%v", info.Attempt, r.Context().Err()))
	first := len(h.order) == 1
	h.mu.Unlock()
	h.entered <- info.Attempt
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
		lag        time.Duration
		first      int // attempt that enters first; 0: either
	}{
		{"held first after a lag", false, 10 * time.Millisecond, 1},
		{"retry first after a lag", true, 10 * time.Millisecond, 2},
		{"held first, no lag", false, 0, 0},
		{"retry first, no lag", true, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			h := newRendezvous()
			rule := Rule{Script: []Fault{{Kind: FaultHold, Delay: tc.lag, RetryFirst: tc.retryFirst}}}
			s := startServer(t, h, Config{Rules: []Rule{rule}}, clk)

			// The client gives up on attempt 1, which the server holds.
			if _, _, err := post(freshClient(100*time.Millisecond), s.URL, "key-1", ""); !isTimeout(err) {
				t.Fatalf("attempt 1: error %v, want a timeout", err)
			}
			retry := make(chan error, 1)
			go func() {
				resp, _, err := post(freshClient(10*time.Second), s.URL, "key-1", "")
				if err == nil && resp.StatusCode != http.StatusCreated {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
				retry <- err
			}()
			first := receive(t, h.entered)
			if tc.lag > 0 {
				clk.waitTimer(t, tc.lag) // the second mover waits for its lag
				select {
				case a := <-h.entered:
					t.Fatalf("attempt %d entered before the lag passed", a)
				default:
				}
				clk.Advance(tc.lag)
			}
			second := receive(t, h.entered)
			if err := <-retry; err != nil {
				t.Fatalf("attempt 2: %v, want 201", err)
			}
			if !<-h.overlap {
				t.Fatal("the two attempts were never in the handler together")
			}
			if tc.first != 0 && (first != tc.first || second != 3-tc.first) {
				t.Fatalf("entered %d then %d, want %d first", first, second, tc.first)
			}
			checkHoldEvents(t, s, h)
		})
	}
}

func receive(t *testing.T, c chan int) int {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing entered the handler within 10s")
	}
	return 0
}

// checkHoldEvents checks that both attempts ran with a live context, the
// first one held.
func checkHoldEvents(t *testing.T, s *Server, h *rendezvous) {
	t.Helper()
	for _, ev := range waitEvents(t, s, 2) {
		if !ev.HandlerRan || (ev.Attempt == 1) != (ev.Fault.Kind == FaultHold) {
			t.Fatalf("event %+v: want handler ran, hold on attempt 1 only", ev)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.order {
		if !strings.HasSuffix(e, "ctx-err=<nil>") {
			t.Fatalf("handler entries %q: the held attempt's context must outlive its client", h.order)
		}
	}
}

func TestHoldGivesUpWithoutRetry(t *testing.T) {
	clk := newFakeClock()
	a := &app{}
	s := startServer(t, a, Config{HoldTimeout: time.Minute, Rules: []Rule{Always(Match{}, Fault{Kind: FaultHold})}}, clk)
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
