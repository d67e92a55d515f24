package main

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"
)

// record is what one operation did.
type record struct {
	start, end time.Duration // offsets from the run's start
	failure    string        // "" when the payment was made
}

// run is what one client did in one scenario.
type run struct {
	records  []record
	requests int64 // requests that reached the host
	refused  int64 // of them, answered 503 for capacity or 429 for the quota
	queue    []int // requests in service or queued at the host, sampled per bin
	served   []int // requests the host had served by each bin's end, sampled with queue
}

// runOnce starts sc's operations open-loop through a fresh client of c
// against h, each in its own goroutine under its own deadline, and returns
// what each did and what the host saw.
func runOnce(h *host, sc scenario, c client) run {
	base := &http.Transport{MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048, IdleConnTimeout: 30 * time.Second}
	defer base.CloseIdleConnections()
	do := c.new(base)
	starts := sc.starts()
	records := make([]record, len(starts))
	start := time.Now()
	h.reset(sc, start)
	stop := make(chan struct{})
	sampled := make(chan samples)
	go func() { sampled <- sampleQueue(h, stop) }()
	var wg sync.WaitGroup
	for op, at := range starts {
		// Open loop: operation op starts at its offset, whatever the
		// earlier ones are doing.
		time.Sleep(time.Until(start.Add(at)))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), sc.deadline)
			defer cancel()
			began := time.Since(start)
			failure := do(ctx, h.url, op)
			records[op] = record{start: began, end: time.Since(start), failure: failure}
		})
	}
	wg.Wait()
	close(stop)
	s := <-sampled
	return run{records: records, requests: h.requests.Load(), refused: h.refused.Load(), queue: s.queue, served: s.served}
}

// samples are what sampleQueue saw of a host, one of each per bin.
type samples struct{ queue, served []int }

// sampleQueue samples how many requests h holds (in service or queued),
// and how many it has served, once per bin, until stop is closed.
func sampleQueue(h *host, stop <-chan struct{}) samples {
	tick := time.NewTicker(bin)
	defer tick.Stop()
	var out samples
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
			out.queue = append(out.queue, int(h.admitted.Load()))
			out.served = append(out.served, int(h.served.Load()))
		}
	}
}

// figures summarise one run.
type figures struct {
	ops, failed      int
	requestsPerOp    float64
	refused          int64         // requests answered 503 for capacity or 429 for the quota
	okP50, okP99     time.Duration // of the operations made
	peakQueue        int           // the most requests the host held at a sample
	p50, p99         time.Duration // of every operation's latency, failed ones included
	failFrom, failTo time.Duration // the first and the last failure's end, 0 when none
	reasons          map[string]int
	afterOK          float64 // the share of the operations started at or after the scenario's after that were made
	busy             float64 // the share of the host's capacity it served during the overload (0 to after), 0 when none
}

func summarise(rn run, sc scenario) figures {
	after := sc.after
	records, requests := rn.records, rn.requests
	f := figures{ops: len(records), reasons: map[string]int{}, refused: rn.refused}
	for _, q := range rn.queue {
		f.peakQueue = max(f.peakQueue, q)
	}
	latencies := make([]time.Duration, 0, len(records))
	var okLatencies []time.Duration
	var afterOps, afterOK int
	for _, r := range records {
		latencies = append(latencies, r.end-r.start)
		if after > 0 && r.start >= after {
			afterOps++
			if r.failure == "" {
				afterOK++
			}
		}
		if r.failure == "" {
			okLatencies = append(okLatencies, r.end-r.start)
			continue
		}
		f.failed++
		f.reasons[r.failure]++
		if f.failFrom == 0 || r.end < f.failFrom {
			f.failFrom = r.end
		}
		f.failTo = max(f.failTo, r.end)
	}
	f.requestsPerOp = float64(requests) / float64(len(records))
	f.busy = busy(rn.served, sc)
	if afterOps > 0 {
		f.afterOK = float64(afterOK) / float64(afterOps)
	}
	slices.Sort(latencies)
	f.p50, f.p99 = quantile(latencies, 0.50), quantile(latencies, 0.99)
	slices.Sort(okLatencies)
	f.okP50, f.okP99 = quantile(okLatencies, 0.50), quantile(okLatencies, 0.99)
	return f
}

// busy returns the share of its capacity that the host served from the
// start to sc.after (the overload), from the served counts sampled per
// bin: 1 when it served a request in every slot all along.
func busy(served []int, sc scenario) float64 {
	n := int(sc.after / bin)
	if sc.capacity == nil || n == 0 || len(served) < n {
		return 0
	}
	capacity := float64(sc.capacity.slots) * sc.after.Seconds() / sc.capacity.service.Seconds()
	return float64(served[n-1]) / capacity
}

// quantile returns the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// median returns the median of xs (the lower of the two middle ones).
func median[T int | float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)/2]
}
