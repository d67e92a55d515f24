// Command jitter simulates N clients that contend for one resource and back
// off when they collide, in the manner of the AWS Architecture Blog study
// "Exponential Backoff and Jitter" (2015), using idem's own Backoff. It
// reports, per jitter strategy, the calls made and the time until the last
// client succeeded, averaged over seeded runs:
//
//	go run ./bench/jitter                       # 100 clients, 50 runs
//	go run ./bench/jitter -clients 500 -runs 20 -seed 7
//
// The model: every client wants one write at time 0. A write holds the
// resource for -service; a write that starts while another holds it
// conflicts (optimistic concurrency), fails, and its client retries after
// Backoff.Delay. The simulation is discrete-event and deterministic for a
// seed; nothing sleeps.
package main

import (
	"container/heap"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem"
)

func main() {
	clients := flag.Int("clients", 100, "clients contending for the resource")
	runs := flag.Int("runs", 50, "seeded runs averaged per strategy")
	seed := flag.Uint64("seed", 1, "seed of the first run")
	service := flag.Duration("service", time.Millisecond, "how long one write holds the resource")
	base := flag.Duration("base", 10*time.Millisecond, "backoff base")
	cap := flag.Duration("cap", 10*time.Second, "backoff cap")
	flag.Parse()
	if *clients <= 0 || *runs <= 0 || *service <= 0 || *base <= 0 || *cap < *base {
		fmt.Fprintln(os.Stderr, "jitter: -clients, -runs, -service and -base must be positive and -cap >= -base")
		os.Exit(2)
	}
	strategies := []struct {
		name   string
		jitter idem.Jitter
	}{
		{"no jitter", idem.NoJitter},
		{"full jitter", idem.FullJitter},
		{"equal jitter", idem.EqualJitter},
		{"decorrelated jitter", idem.DecorrelatedJitter},
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "strategy\tcalls (mean)\tcalls vs no jitter\tcompletion (mean)\t")
	var baseline float64
	for i, s := range strategies {
		b := idem.Backoff{Base: *base, Cap: *cap, Jitter: s.jitter}
		var calls, done float64
		for r := range *runs {
			c, d := simulate(*clients, *service, b, rand.New(rand.NewPCG(*seed+uint64(r), 0x1de)))
			calls += float64(c)
			done += float64(d)
		}
		calls /= float64(*runs)
		done /= float64(*runs)
		if i == 0 {
			baseline = calls
		}
		fmt.Fprintf(w, "%s\t%.0f\t%+.0f%%\t%s\t\n", s.name, calls, 100*(calls/baseline-1),
			time.Duration(done).Round(time.Millisecond))
	}
	w.Flush()
}

// simulate runs one contention episode and returns the calls made and the
// time the last client succeeded.
func simulate(clients int, service time.Duration, b idem.Backoff, rng *rand.Rand) (calls int, done time.Duration) {
	q := make(attempts, 0, clients)
	for c := range clients {
		q = append(q, attempt{client: c})
	}
	heap.Init(&q)
	var busyUntil time.Duration
	for q.Len() > 0 {
		a := heap.Pop(&q).(attempt)
		calls++
		if a.at >= busyUntil { // the write gets the resource
			busyUntil = a.at + service
			done = max(done, busyUntil)
			continue
		}
		wait := b.Delay(a.retries, a.prev, rng.Float64())
		heap.Push(&q, attempt{client: a.client, at: a.at + wait, retries: a.retries + 1, prev: wait})
	}
	return calls, done
}

// attempt is a client's next write, ordered by time (then client, so that
// runs are deterministic).
type attempt struct {
	client  int
	at      time.Duration
	retries int
	prev    time.Duration
}

type attempts []attempt

func (q attempts) Len() int { return len(q) }
func (q attempts) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].client < q[j].client
}
func (q attempts) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *attempts) Push(x any)   { *q = append(*q, x.(attempt)) }
func (q *attempts) Pop() any {
	old := *q
	a := old[len(old)-1]
	*q = old[:len(old)-1]
	return a
}
