package main

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lineWriter hands each write to the test.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// fakeClock is a progress's clock that the test moves: each tick it sends
// advances the time by the ticker's period.
type fakeClock struct {
	t      atomic.Int64 // nanoseconds since the start
	period chan time.Duration
	ticks  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{period: make(chan time.Duration, 1), ticks: make(chan time.Time)}
}

func (c *fakeClock) now() time.Time { return time.Unix(0, c.t.Load()) }

func (c *fakeClock) ticker(d time.Duration) (<-chan time.Time, func()) {
	c.period <- d
	return c.ticks, func() {}
}

// tick moves the time by d and delivers a tick.
func (c *fakeClock) tick(d time.Duration) {
	c.t.Add(int64(d))
	c.ticks <- c.now()
}

func next(t *testing.T, w lineWriter) string {
	t.Helper()
	select {
	case line := <-w:
		return line
	case <-time.After(10 * time.Second):
		t.Fatal("no progress line within 10s")
	}
	return ""
}

// Outside a terminal (a log, CI) the progress is a line every 5 s and a
// last one when the step ends.
func TestProgressLines(t *testing.T) {
	w, clock := make(lineWriter, 10), newFakeClock()
	p := progress{w: w, now: clock.now, tick: clock.ticker}
	var done atomic.Int64
	stop := p.show("idem client", func() string { return fmt.Sprintf("%d/3000 payments", done.Load()) })
	require.Equal(t, 5*time.Second, <-clock.period, "a line every 5 s")

	done.Store(1234)
	clock.tick(5 * time.Second)
	assert.Equal(t, "idem client: 1234/3000 payments, 5s\n", next(t, w))
	done.Store(2900)
	clock.tick(5 * time.Second)
	assert.Equal(t, "idem client: 2900/3000 payments, 10s\n", next(t, w))

	done.Store(3000)
	clock.t.Add(int64(2340 * time.Millisecond))
	stop()
	assert.Equal(t, "idem client: 3000/3000 payments, done in 12.3s\n", next(t, w))
	assert.Empty(t, w, "nothing after stop")
}

// On a terminal the progress is one line, redrawn every 100 ms, and
// cleared when the step ends.
func TestProgressRedrawsOnATerminal(t *testing.T) {
	w, clock := make(lineWriter, 10), newFakeClock()
	p := progress{w: w, redraw: true, now: clock.now, tick: clock.ticker}
	stop := p.show("idem client", func() string { return "7/10 payments" })
	require.Equal(t, 100*time.Millisecond, <-clock.period)
	clock.tick(100 * time.Millisecond)
	assert.Equal(t, "\ridem client: 7/10 payments, 0.1s ", next(t, w))
	stop()
	assert.Regexp(t, `^\r {34}\r$`, next(t, w), "stop clears the line")
}
