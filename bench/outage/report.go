package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// report prints one scenario's table: per client, the medians over the
// rounds, and the failures by reason of the last round.
func report(out io.Writer, sc scenario, cs []client, results [][]figures) {
	load := fmt.Sprintf("%d operations a second for %s", sc.rate, sc.duration)
	if sc.then.rate > 0 {
		load += fmt.Sprintf(", then %d a second for %s", sc.then.rate, sc.then.duration)
	}
	fmt.Fprintf(out, "\n%s: %s, %s deadlines\n", sc.name, load, sc.deadline)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "client\tfailed\tok\tok started after\thost busy\trequests/op\trefused\tpeak held\tp50\tp99\tp50 of ok\tp99 of ok\tfailures from-to\tfailures by reason (last round)")
	for i, c := range cs {
		rs := results[i]
		ops := rs[0].ops
		failed := median(collect(rs, func(f figures) int { return f.failed }))
		span := "-"
		if from, to := median(collect(rs, func(f figures) time.Duration { return f.failFrom })),
			median(collect(rs, func(f figures) time.Duration { return f.failTo })); to > 0 {
			span = fmt.Sprintf("%.1f-%.1f s", from.Seconds(), to.Seconds())
		}
		after := "-"
		if sc.after > 0 {
			after = fmt.Sprintf("%.1f%%", 100*median(collect(rs, func(f figures) float64 { return f.afterOK })))
		}
		busy := "-"
		if sc.capacity != nil && sc.after > 0 {
			busy = fmt.Sprintf("%.1f%%", 100*median(collect(rs, func(f figures) float64 { return f.busy })))
		}
		fmt.Fprintf(w, "%s\t%d\t%.1f%%\t%s\t%s\t%.3f\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", c.name, failed,
			100*float64(ops-failed)/float64(ops), after, busy,
			median(collect(rs, func(f figures) float64 { return f.requestsPerOp })),
			median(collect(rs, func(f figures) int { return int(f.refused) })),
			median(collect(rs, func(f figures) int { return f.peakQueue })),
			round(median(collect(rs, func(f figures) time.Duration { return f.p50 }))),
			round(median(collect(rs, func(f figures) time.Duration { return f.p99 }))),
			round(median(collect(rs, func(f figures) time.Duration { return f.okP50 }))),
			round(median(collect(rs, func(f figures) time.Duration { return f.okP99 }))),
			span, reasons(rs[len(rs)-1].reasons))
	}
	w.Flush()
}

func collect[T any](rs []figures, get func(figures) T) []T {
	out := make([]T, len(rs))
	for i, f := range rs {
		out[i] = get(f)
	}
	return out
}

func reasons(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func round(d time.Duration) time.Duration {
	if d >= 100*time.Millisecond {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}
