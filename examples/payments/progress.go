package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress shows the demo's long steps while they run, on stderr: on a
// terminal, one line that redraws itself every redrawEvery; elsewhere (a
// log file, CI), a line every lineEvery, and one when the step ends, so a
// log shows that the demo is alive without a redraw's carriage returns.
type progress struct {
	w io.Writer
	// redraw: w is a terminal.
	redraw bool
	// now and tick are the clock (time.Now, and a time.Ticker's channel
	// and Stop), injected by tests.
	now  func() time.Time
	tick func(d time.Duration) (c <-chan time.Time, stop func())
}

const (
	redrawEvery = 100 * time.Millisecond
	lineEvery   = 5 * time.Second
)

// newProgress shows progress on f, redrawn when f is a terminal (a
// character device: os.File.Stat tells, with no dependency).
func newProgress(f *os.File) progress {
	fi, err := f.Stat()
	return progress{w: f, redraw: err == nil && fi.Mode()&os.ModeCharDevice != 0, now: time.Now, tick: realTicker}
}

// noProgress shows nothing.
func noProgress() progress { return progress{w: io.Discard, now: time.Now, tick: realTicker} }

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// show shows the step name with status() until stop is called: on a
// terminal it then clears the line, elsewhere it writes the last one.
func (p progress) show(name string, status func() string) (stop func()) {
	every := lineEvery
	if p.redraw {
		every = redrawEvery
	}
	ticks, stopTicks := p.tick(every)
	start := p.now()
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		defer stopTicks()
		for {
			select {
			case <-ticks:
				p.line(name, status(), p.now().Sub(start))
			case <-quit:
				p.end(name, status(), p.now().Sub(start))
				return
			}
		}
	}()
	return func() { close(quit); <-finished }
}

// line writes one progress line, or redraws the terminal's.
func (p progress) line(name, status string, elapsed time.Duration) {
	if p.redraw {
		fmt.Fprintf(p.w, "\r%s: %s, %.1fs ", name, status, elapsed.Seconds())
		return
	}
	fmt.Fprintf(p.w, "%s: %s, %s\n", name, status, elapsed.Round(time.Second))
}

// end clears the terminal's line, or writes the step's last line.
func (p progress) end(name, status string, elapsed time.Duration) {
	if p.redraw {
		width := len(fmt.Sprintf("\r%s: %s, %.1fs ", name, status, elapsed.Seconds()))
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", width)+"\r")
		return
	}
	fmt.Fprintf(p.w, "%s: %s, done in %s\n", name, status, elapsed.Round(100*time.Millisecond))
}
