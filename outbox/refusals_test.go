package outbox

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A burst of refused messages is spread so that no second has more than
// refusalRate of them due; each waits at least its backoff.
func TestRefusalsArePaced(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newRefusals(func() time.Time { return now }, func() float64 { return 0.5 })
	perSecond := map[int64]int{}
	for id := range int64(2000) {
		wait := p.schedule("http://down", id, 300*time.Millisecond)
		require.GreaterOrEqual(t, wait, 300*time.Millisecond, "message %d", id)
		perSecond[now.Add(wait).Unix()]++
	}
	for sec, n := range perSecond {
		require.LessOrEqual(t, n, refusalRate, "messages due in second %d", sec)
	}
	assert.Equal(t, (2000+refusalRate-1)/refusalRate, len(perSecond), "seconds used")

	now = now.Add(time.Hour) // the seconds before are forgotten
	wait := p.schedule("http://down", 1, 300*time.Millisecond)
	assert.Equal(t, 300*time.Millisecond, wait, "a second with room")
	assert.LessOrEqual(t, len(p.due), 2, "the counts of past seconds are dropped")
}

// The messages held for a destination are released, once, when it takes
// a delivery again; a message woken at its time is no longer held.
func TestRefusalsRelease(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newRefusals(func() time.Time { return now }, func() float64 { return 0 })
	for _, id := range []int64{1, 2, 3} {
		p.schedule("http://a", id, time.Minute)
	}
	p.schedule("http://b", 4, time.Minute)
	p.woken("http://a", 2)
	got := p.release("http://a")
	slices.Sort(got)
	assert.Equal(t, []int64{1, 3}, got)
	assert.Empty(t, p.release("http://a"), "released once")
	assert.Equal(t, []int64{4}, p.release("http://b"))
}
