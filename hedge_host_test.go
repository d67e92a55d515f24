package idem

import (
	"fmt"
	"math"
	"testing"
	"time"

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

	many := &hedgeHost{}
	many.attempts.Store(99)
	many.hedges.Store(28)
	assert.True(t, many.admitHedge(0.29, 1), "29 of 100 at 0.29, although 0.29 x 100 is 28.999... in float64")
	assert.False(t, many.admitHedge(0.29, 1), "30 of 100")
}

// A NaN share is no share: the default applies.
func TestHedgeInFlightShareDefault(t *testing.T) {
	for _, share := range []float64{0, -1, math.NaN()} {
		h := newHedger(HedgeConfig{Delay: time.Millisecond, InFlightShare: share}, 0)
		assert.Equal(t, defaultHedgeInFlightShare, h.cfg.InFlightShare, "%v", share)
	}
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

// Beyond max hosts, a host with attempts in flight is kept while another
// has none.
func TestHedgeHostsForgetAnIdleHost(t *testing.T) {
	for range 20 { // map order is random: any order must keep the busy host
		h := &hedgeHosts{max: 3, byHost: map[string]*hedgeHost{}}
		busy := h.lookup(mustURL(t, "http://busy.test/"))
		busy.started()
		h.lookup(mustURL(t, "http://idle1.test/"))
		h.lookup(mustURL(t, "http://idle2.test/"))
		h.lookup(mustURL(t, "http://new.test/"))
		assert.Same(t, busy, h.lookup(mustURL(t, "http://busy.test/")))
	}
}
