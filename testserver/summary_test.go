package testserver

import (
	"sync"
	"testing"
	"time"
)

// TestSummaryAddCountsBeyondMaxEvents: a Summary fed from OnEvent counts
// every request, however few events the server keeps, and agrees with
// Summarize over a complete log.
func TestSummaryAddCountsBeyondMaxEvents(t *testing.T) {
	var mu sync.Mutex
	var live Summary
	cfg := Config{MaxEvents: 2, OnEvent: func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		live.Add(e)
	}}
	var all []Event
	full := startServer(t, &app{}, Config{OnEvent: func(e Event) { mu.Lock(); all = append(all, e); mu.Unlock() }}, nil)
	short := startServer(t, &app{}, cfg, nil)
	c := freshClient(5 * time.Second)
	for _, s := range []*Server{short, full} {
		for _, key := range []string{"a", "a", "b", "", ""} {
			if _, _, err := post(c, s.URL, key, ""); err != nil {
				t.Fatal(err)
			}
		}
		waitEvents(t, s, 5)
	}
	if n := len(short.Events()); n != 2 {
		t.Fatalf("Events() kept %d, want MaxEvents 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	want := Summarize(all)
	if live.String() != want.String() || live.Requests != 5 || live.Operations != 2 || live.MaxAttempt != 2 || live.Conns != 5 {
		t.Fatalf("Summary from Add:\n%+v\nwant\n%+v with 5 requests, 2 operations, 5 connections", live, want)
	}
}
