package idem

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The quantile is the nearest rank of the window's latest samples, ready
// after MinSamples and recomputed every window/16 samples.
func TestLatenciesQuantile(t *testing.T) {
	l := newLatencies(0.9, 32, 10)
	for i := 1; i <= 9; i++ {
		l.add(time.Duration(i) * time.Millisecond)
	}
	_, ok := l.get()
	assert.False(t, ok, "9 samples, fewer than MinSamples")
	l.add(10 * time.Millisecond)
	d, ok := l.get()
	assert.True(t, ok)
	assert.Equal(t, 9*time.Millisecond, d, "p90 of 1..10 ms")

	l.add(time.Second) // 11 samples: not recomputed until 12 (every 32/16 = 2)
	d, _ = l.get()
	assert.Equal(t, 9*time.Millisecond, d)
	l.add(time.Second)
	d, _ = l.get()
	assert.Equal(t, time.Second, d, "ceil(0.9 x 12) = 11th of 12")

	for range 32 { // the window forgets the old samples
		l.add(2 * time.Millisecond)
	}
	d, _ = l.get()
	assert.Equal(t, 2*time.Millisecond, d)
}
