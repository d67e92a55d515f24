package outbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A burst of refused turns is spread so that no second has more than
// refusalRate of them ending; the first refusalRate end at once.
func TestRefusalsArePaced(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 300_000_000, time.UTC)
	p := newRefusals(func() time.Time { return now }, func() float64 { return 0.5 })
	perSecond := map[int64]int{}
	for i := range 2000 {
		at := p.pace()
		require.False(t, at.Before(now), "turn %d", i)
		if i < refusalRate {
			require.Equal(t, now, at, "turn %d: this second has room", i)
		}
		perSecond[at.Unix()]++
	}
	for sec, n := range perSecond {
		require.LessOrEqual(t, n, refusalRate, "turns ending in second %d", sec)
	}
	assert.Equal(t, (2000+refusalRate-1)/refusalRate, len(perSecond), "seconds used")

	now = now.Add(time.Hour) // the seconds before are forgotten
	assert.Equal(t, now, p.pace(), "a second with room")
	assert.LessOrEqual(t, len(p.due), 2, "the counts of past seconds are dropped")
}

// The messages held for a destination are released, once, when it takes
// a delivery again, and the turns waiting for it are woken; a message
// woken at its time is no longer held.
func TestRefusalsRelease(t *testing.T) {
	p := newRefusals(time.Now, func() float64 { return 0 })
	for _, id := range []int64{1, 2, 3} {
		require.True(t, p.hold("http://a", id, p.recovered("http://a")))
	}
	require.True(t, p.hold("http://b", 4, p.recovered("http://b")))
	up := p.recovered("http://a")
	p.woken("http://a", 2)
	got := p.release("http://a")
	slices.Sort(got)
	assert.Equal(t, []int64{1, 3}, got)
	select {
	case <-up:
	default:
		t.Fatal("the turns held for http://a are not woken")
	}
	assert.Empty(t, p.release("http://a"), "released once")
	assert.NotEqual(t, up, p.recovered("http://a"), "a new wait after the release")
	assert.Equal(t, []int64{4}, p.release("http://b"))
}

// A message whose delivery was refused before its destination took
// another one, and that comes to be held after it, is not held: the
// release it missed would never come, and it would wait its whole backoff
// (TestRefusedMessagesAreReleasedWhenTheHostAnswers lost such messages
// for the hour of its backoff when a turn was slow to get here).
func TestRefusalsHoldAfterARelease(t *testing.T) {
	p := newRefusals(time.Now, func() float64 { return 0 })
	since := p.recovered("http://a") // the refused delivery begins
	assert.Empty(t, p.release("http://a"), "another turn delivers")
	assert.False(t, p.hold("http://a", 1, since), "held after the release it missed")
	assert.Empty(t, p.release("http://a"), "nothing held")
	assert.True(t, p.hold("http://a", 2, p.recovered("http://a")), "a refusal after the release is held")
	assert.Equal(t, []int64{2}, p.release("http://a"))
}

// A message whose turn held it (its delivery refused) and is still
// ending when another message's delivery to its destination succeeds is
// due at once when its turn ends, not after its backoff: the release
// came before the turn could be made due (Memory; the Postgres outbox is
// TestRefusedMessagesAreReleasedWhenTheHostAnswers under load).
func TestMemoryReleasesAMessageHeldDuringItsTurn(t *testing.T) {
	q := NewMemory(fastConfig(&events{}))
	ctx := context.Background()
	m := validMessage()
	m.Key = "held"
	held, err := q.Enqueue(ctx, m)
	require.NoError(t, err)
	m.Key = "probe"
	probe, err := q.Enqueue(ctx, m)
	require.NoError(t, err)
	q.mu.Lock()
	q.ready = nil
	q.msgs[held].state, q.msgs[probe].state = memRunning, memRunning // both turns under way
	q.mu.Unlock()

	q.apply(q.msgs[probe], probe, turn{v: delivered, release: []int64{held}}) // the probe is delivered
	q.apply(q.msgs[held], held, turn{v: localRefusal, wait: time.Hour})       // then the held turn ends
	q.mu.Lock()
	defer q.mu.Unlock()
	assert.Equal(t, []int64{held}, q.ready, "due at once")
	assert.Nil(t, q.msgs[held].timer, "no backoff")
}
