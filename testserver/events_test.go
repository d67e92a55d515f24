package testserver

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestEventLogKeepsTheLatestInOrder(t *testing.T) {
	for _, max := range []int{0, 1, 3, 4} {
		t.Run(fmt.Sprint("max ", max), func(t *testing.T) {
			l := newEventLog(max)
			for i := 1; i <= 10; i++ {
				l.add(Event{Index: i})
				first := 1
				if max > 0 {
					first = i - min(i, max) + 1
				}
				var want []int
				for j := first; j <= i; j++ {
					want = append(want, j)
				}
				var got []int
				for _, e := range l.snapshot() {
					got = append(got, e.Index)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("after %d adds: kept %v, want %v", i, got, want)
				}
			}
			if l.total != 10 {
				t.Fatalf("total = %d, want 10", l.total)
			}
		})
	}
}

func TestEventLogWaitWakesOnAdd(t *testing.T) {
	l := newEventLog(2)
	got := make(chan []Event, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		events, _ := l.wait(ctx, 3)
		got <- events
	}()
	for i := 1; i <= 3; i++ {
		l.add(Event{Index: i})
	}
	if events := <-got; len(events) != 2 || events[0].Index != 2 || events[1].Index != 3 {
		t.Fatalf("wait(3) = %+v, want the events 2 and 3", events)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if events, err := l.wait(ctx, 4); err != context.Canceled || len(events) != 2 {
		t.Fatalf("wait(4) with a cancelled ctx = %d events, %v; want 2, context.Canceled", len(events), err)
	}
}

// BenchmarkEventLogAddFull measures logging into a full log of the size
// faultproxy used to keep: the cost of one add once MaxEvents is reached.
func BenchmarkEventLogAddFull(b *testing.B) {
	const max = 100000
	l := newEventLog(max)
	for i := 0; i < max; i++ {
		l.add(Event{Index: i})
	}
	for i := 0; b.Loop(); i++ {
		l.add(Event{Index: max + i})
	}
}

func TestFinalStatus(t *testing.T) {
	for _, tc := range []struct {
		writes []int
		want   int
	}{{nil, 200}, {[]int{100}, 200}, {[]int{103, 201, 500}, 201}, {[]int{404, 200}, 404}} {
		var f finalStatus
		for _, c := range tc.writes {
			f.write(c)
		}
		if got := f.get(); got != tc.want {
			t.Errorf("status after WriteHeader%v = %d, want %d", tc.writes, got, tc.want)
		}
	}
}
