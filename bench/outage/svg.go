package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// The timeline's geometry, in SVG user units.
const (
	bin        = 100 * time.Millisecond
	binWidth   = 6.0
	laneHeight = 90.0
	labelWidth = 190.0
	top        = 40.0
)

// lane counts one client's operations ended per bin: made and failed;
// and the requests the host held at each bin's sample.
type lane struct {
	ok, failed, queue []int
}

func lanesOf(cs []client, runs []run, bins int) []lane {
	lanes := make([]lane, len(cs))
	for i := range cs {
		lanes[i] = lane{ok: make([]int, bins), failed: make([]int, bins), queue: runs[i].queue}
		for _, r := range runs[i].records {
			b := min(int(r.end/bin), bins-1)
			if r.failure == "" {
				lanes[i].ok[b]++
			} else {
				lanes[i].failed[b]++
			}
		}
	}
	return lanes
}

// writeTimeline draws sc's runs as an SVG at path: one lane per client,
// operations made per 100 ms as bars above the lane's axis and failed ones
// below it, the requests held at the host (in service or queued) as a
// blue line when the host has a capacity, the outage's window shaded.
func writeTimeline(path string, sc scenario, cs []client, runs []run) error {
	var end time.Duration
	for _, rs := range runs {
		for _, r := range rs.records {
			end = max(end, r.end)
		}
	}
	bins := int(end/bin) + 1
	lanes := lanesOf(cs, runs, bins)
	peak, peakQueue := 1, 1
	for _, l := range lanes {
		for b := range bins {
			peak = max(peak, l.ok[b], l.failed[b])
		}
		for _, q := range l.queue {
			peakQueue = max(peakQueue, q)
		}
	}
	width := labelWidth + float64(bins)*binWidth + 20
	height := top + float64(len(cs))*laneHeight + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="18" font-size="14">%s: operations made (green, up) and failed (red, down) per 100 ms; outage shaded</text>`+"\n", sc.name)
	x := func(d time.Duration) float64 { return labelWidth + float64(d)/float64(bin)*binWidth }
	if sc.to > sc.from {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="#ddd"/>`+"\n",
			x(sc.from), top-8, x(sc.to)-x(sc.from), float64(len(cs))*laneHeight)
	}
	half := laneHeight/2 - 6
	for i, l := range lanes {
		axis := top + float64(i)*laneHeight + laneHeight/2
		fmt.Fprintf(&b, `<text x="10" y="%.1f">%s</text>`+"\n", axis+4, cs[i].name)
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/>`+"\n", labelWidth, axis, width-20, axis)
		for k := range bins {
			if n := l.ok[k]; n > 0 {
				h := half * float64(n) / float64(peak)
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2a2"/>`+"\n", labelWidth+float64(k)*binWidth, axis-h, binWidth-1, h)
			}
			if n := l.failed[k]; n > 0 {
				h := half * float64(n) / float64(peak)
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#d22"/>`+"\n", labelWidth+float64(k)*binWidth, axis, binWidth-1, h)
			}
		}
		if sc.capacity != nil {
			b.WriteString(queueLine(l.queue, axis, half, peakQueue))
		}
	}
	axisY := top + float64(len(cs))*laneHeight + 12
	for s := time.Duration(0); s <= end; s += time.Second {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%ds</text>`+"\n", x(s), axisY, int(s.Seconds()))
	}
	legend := fmt.Sprintf("bar height: %d operations = half a lane", peak)
	if sc.capacity != nil {
		legend += fmt.Sprintf("; blue line: requests held at the host, %d = half a lane", peakQueue)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" fill="#555">%s</text>`+"\n", width-20, height-4, legend)
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// queueLine draws the requests held at the host per bin as a polyline
// above a lane's axis, peak at half a lane's height.
func queueLine(queue []int, axis, half float64, peak int) string {
	if len(queue) == 0 {
		return ""
	}
	var pts strings.Builder
	for k, q := range queue {
		fmt.Fprintf(&pts, "%.1f,%.1f ", labelWidth+(float64(k)+0.5)*binWidth, axis-half*float64(q)/float64(peak))
	}
	return fmt.Sprintf(`<polyline points="%s" fill="none" stroke="#25c" stroke-width="1.2"/>`+"\n", strings.TrimSpace(pts.String()))
}
