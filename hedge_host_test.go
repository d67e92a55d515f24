package idem

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Up to the floor (MaxHedges) hedges in flight are always allowed; more
// only while the hedges stay within the share of the attempts in flight,
// the new hedge counted in both.
func TestAdmitHedgeBoundedByShare(t *testing.T) {
	h := &hedgeHost{}
	h.attempts.Store(8)
	assert.True(t, h.admitHedge(0.1, 1), "the first hedge, whatever the share")
	h.started()
	assert.False(t, h.admitHedge(0.1, 1), "2 of 10 in flight would be hedges")
	assert.EqualValues(t, 1, h.hedges.Load(), "a denied hedge is not counted")

	h.attempts.Store(19) // with the first hedge's attempt
	assert.True(t, h.admitHedge(0.1, 1), "2 of 20")
	h.started()
	assert.False(t, h.admitHedge(0.1, 1), "3 of 21")

	h.ended(true)
	h.ended(true)
	assert.EqualValues(t, 0, h.hedges.Load())
	assert.EqualValues(t, 18, h.attempts.Load())

	assert.True(t, h.admitHedge(1, 1))
	h.release()
	assert.EqualValues(t, 0, h.hedges.Load(), "release gives back an admitted hedge")

	lone := &hedgeHost{}
	lone.started()
	for i := range 3 {
		assert.True(t, lone.admitHedge(0.1, 3), "hedge %d of a lone call with MaxHedges 3", i+1)
		lone.started()
	}
	assert.False(t, lone.admitHedge(0.1, 3), "a fourth")
}

// The state of at most max hosts is kept; the spellings of one host share
// it, and only a percentile policy keeps latencies.
func TestHedgeHostsBounded(t *testing.T) {
	h := &hedgeHosts{q: 0.5, window: 4, minSamples: 1, max: 3, byHost: map[string]*hedgeHost{}}
	a := h.lookup(mustURL(t, "http://a.test/x"))
	assert.Same(t, a, h.lookup(mustURL(t, "HTTP://A.test:80/y")))
	assert.NotNil(t, a.latencies)
	for i := range 10 {
		h.lookup(mustURL(t, fmt.Sprintf("http://h%d.test/", i)))
		assert.LessOrEqual(t, len(h.byHost), 3)
	}
	fixed := &hedgeHosts{max: 3, byHost: map[string]*hedgeHost{}}
	assert.Nil(t, fixed.lookup(mustURL(t, "http://a.test/")).latencies)
}
