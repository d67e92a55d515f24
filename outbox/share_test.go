package outbox

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hanging is a downstream that holds every request until the test ends.
func hanging(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	release := make(chan struct{})
	var held atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that net/http notices the client's close
		held.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before Close
	return srv, &held
}

// Ten messages to a healthy host, enqueued behind 40 to a host that holds
// every request, are delivered while the held deliveries are still in
// flight: the hanging host takes three of the four workers at most (issue
// 28 defect 1: all four waited on it, and the ten were delivered only when
// the deliveries timed out).
func TestASlowDestinationLeavesWorkersToTheOthers(t *testing.T) {
	config := func() Config {
		cfg := fastConfig(&events{})
		cfg.Workers, cfg.Timeout, cfg.RescueAfter = 4, time.Minute, 2*time.Minute
		return cfg
	}
	eachTarget(t, config, func(t *testing.T, tg target) {
		slow, held := hanging(t)
		healthy := newDownstream(t, nil)
		ctx := context.Background()
		for i := range 40 {
			_, err := tg.enqueue(ctx, Message{Name: "slow", Method: "POST", URL: slow.URL, Key: "slow-" + strconv.Itoa(i)})
			require.NoError(t, err)
		}
		for i := range 10 {
			m := healthy.message("ok")
			m.Key = "ok-" + strconv.Itoa(i)
			_, err := tg.enqueue(ctx, m)
			require.NoError(t, err)
		}
		running(t, tg.run)
		eventually(t, func() bool { return len(healthy.keys()) == 10 }, "the healthy host's messages are delivered")
		assert.LessOrEqual(t, held.Load(), int64(3), "requests held by the hanging host")
	})
}

// testShare is a share of 20 workers on a clock the test moves.
func testShare(t *testing.T) (*share, *time.Time) {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return newShare(20, time.Minute, func() time.Time { return now }, func() float64 { return 0 }), &now
}

// A destination not known yet, or slow, takes at most 15 of 20 workers
// (a quarter stays for the others); slow destinations split those 15; a
// fast one takes any worker.
func TestShareBounds(t *testing.T) {
	s, now := testShare(t)
	take := func(dest string) bool {
		done, wait := s.take(dest)
		require.True(t, done != nil || wait > 0, "a put-off message waits")
		return done != nil
	}
	for range 15 {
		require.True(t, take("http://slow"))
	}
	require.False(t, take("http://slow"), "a 16th delivery to a destination not known fast")
	require.True(t, take("http://other"), "another destination, its first")
	for range 6 {
		require.True(t, take("http://other"))
	}
	require.False(t, take("http://other"), "two slow destinations: 15/2 each")

	fast, _ := s.take("http://fast")
	*now = now.Add(10 * time.Millisecond)
	fast(true) // 10 ms
	for range 30 {
		done, wait := s.take("http://fast")
		require.NotNil(t, done, "a fast destination is not bounded (wait %s)", wait)
	}
	*now = now.Add(slowDelivery)
	done, _ := s.take("http://fast")
	assert.Nil(t, done, "its deliveries in flight have run past slowDelivery: it is slow now")
}

// A message put off waits for its place in the destination's schedule:
// spaced by the destination's delivery time over its bound, at most
// maxWait.
func TestSharePutOffSchedule(t *testing.T) {
	s, now := testShare(t)
	var ends []func(bool)
	for range 15 {
		done, _ := s.take("http://slow")
		ends = append(ends, done)
	}
	*now = now.Add(3 * time.Second)
	for _, end := range ends {
		end(true) // each took 3 s
	}
	for range 15 {
		done, _ := s.take("http://slow")
		require.NotNil(t, done)
	}
	var waits []time.Duration
	for range 3 {
		done, wait := s.take("http://slow")
		require.Nil(t, done)
		waits = append(waits, wait)
	}
	step := 3 * time.Second / 15
	assert.Equal(t, []time.Duration{step, 2 * step, 3 * step}, waits)
	for range 1000 {
		_, wait := s.take("http://slow")
		require.LessOrEqual(t, wait, time.Minute, "at most maxWait")
	}
}

// A delivery that its client refused to send says nothing of the
// destination's speed.
func TestShareIgnoresRefusals(t *testing.T) {
	s, now := testShare(t)
	done, _ := s.take("http://down")
	*now = now.Add(time.Millisecond)
	done(false)
	assert.False(t, s.dests["http://down"].fast(*now), "still not known")
}

func TestDestinationOf(t *testing.T) {
	assert.Equal(t, "https://api.example.com:8443", destinationOf("HTTPS://API.example.com:8443/v1/x?y=1"))
	assert.Equal(t, "http://127.0.0.1:9", destinationOf("http://127.0.0.1:9/hook"))
	assert.NotEqual(t, destinationOf("http://a.example/x"), destinationOf("https://a.example/x"))
}
