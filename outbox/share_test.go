package outbox

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
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
// every request in the same queue (Memory's one, or Config.Queues 1), are
// delivered while the held deliveries are still in flight: the hanging
// host takes three of the queue's four workers at most (issue 28 defect
// 1: all four waited on it, and the ten were delivered only when the
// deliveries timed out).
func TestASlowDestinationLeavesWorkersToTheOthers(t *testing.T) {
	config := func() Config {
		cfg := fastConfig(&events{})
		cfg.Workers, cfg.Timeout, cfg.RescueAfter, cfg.Queues = 4, time.Minute, 2*time.Minute, 1
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

// inBubble runs f in a synctest bubble, with a share of 20 workers on
// the bubble's clock: time.Sleep moves it.
func inBubble(t *testing.T, f func(t *testing.T, s *share)) {
	synctest.Test(t, func(t *testing.T) {
		f(t, newShare(20, time.Minute, time.Now, func() float64 { return 0 }))
	})
}

// take takes a delivery to dest, and says whether it was admitted, or how
// long the message is put off.
func take(t *testing.T, s *share, dest string) (ticket, time.Duration, bool) {
	t.Helper()
	return s.take(context.Background(), dest)
}

// fill takes n deliveries to dest, each admitted.
func fill(t *testing.T, s *share, dest string, n int) []ticket {
	t.Helper()
	var tickets []ticket
	for range n {
		tk, _, ok := take(t, s, dest)
		require.True(t, ok, "delivery %d to %s", len(tickets)+1, dest)
		tickets = append(tickets, tk)
	}
	return tickets
}

// A destination not known yet, or slow, takes at most 15 of 20 workers
// (a quarter stays for the others); slow destinations split those 15; a
// fast one takes any worker.
func TestShareBounds(t *testing.T) {
	inBubble(t, func(t *testing.T, s *share) {
		fill(t, s, "http://slow", 15)
		time.Sleep(slowDelivery)
		_, wait, ok := take(t, s, "http://slow")
		require.False(t, ok, "a 16th delivery to a destination whose deliveries have run past slowDelivery")
		require.Positive(t, wait, "put off")

		for range 7 {
			_, _, ok := take(t, s, "http://other")
			require.True(t, ok, "another destination, not known yet: up to 15/2")
		}
		time.Sleep(slowDelivery)
		_, _, ok = take(t, s, "http://other")
		require.False(t, ok, "two slow destinations: 15/2 each")

		fast, _, _ := take(t, s, "http://fast")
		time.Sleep(10 * time.Millisecond)
		fast.end(true)
		for range 30 {
			_, wait, ok := take(t, s, "http://fast")
			require.True(t, ok, "a fast destination is not bound (wait %s)", wait)
		}
		time.Sleep(slowDelivery)
		_, _, ok = take(t, s, "http://fast")
		assert.False(t, ok, "its deliveries in flight have run past slowDelivery: it is slow now")
	})
}

// A destination whose deliveries its client refuses (breaker open) may
// take every worker while it is alone in its queue, since its turns end
// at the dispatcher's pace; once another destination had a delivery in
// flight in the last minute, or once one of its deliveries is sent, it
// leaves a quarter to the others again.
func TestShareARefusedDestinationAlone(t *testing.T) {
	inBubble(t, func(t *testing.T, s *share) {
		tickets := fill(t, s, "http://down", 15)
		tickets[0].refused()
		more := fill(t, s, "http://down", 5) // refused and alone: all 20
		other, _, _ := take(t, s, "http://other")
		other.end(true)
		more[0].end(false)
		_, _, ok := take(t, s, "http://down")
		require.False(t, ok, "another destination took a delivery within the minute: a quarter stays for it")
		time.Sleep(sharedWithin)
		tk, _, ok := take(t, s, "http://down")
		require.True(t, ok, "alone again: the 20th worker")
		tk.end(true) // sent, and failed: the breaker's probe
		tk, _, ok = take(t, s, "http://down")
		require.True(t, ok, "a failed delivery does not end the refusals")
		tk.delivered()
		tk.end(true)
		_, _, ok = take(t, s, "http://down")
		assert.False(t, ok, "a delivery succeeded: no longer refused, 15 at most (19 in flight)")
	})
}

// Over its bound, a destination not known yet makes take wait while its
// deliveries are young: one that ends fast admits the waiting one; none
// ending within slowDelivery puts it off.
func TestShareWaitsOnAYoungDestination(t *testing.T) {
	inBubble(t, func(t *testing.T, s *share) {
		first := fill(t, s, "http://new", 15)
		admitted := make(chan bool)
		go func() { _, _, ok := take(t, s, "http://new"); admitted <- ok }()
		synctest.Wait() // take waits
		time.Sleep(time.Millisecond)
		first[0].end(true) // 1 ms: the destination is fast
		require.True(t, <-admitted)

		fill(t, s, "http://hung", 15)
		start := time.Now()
		_, wait, ok := take(t, s, "http://hung")
		require.False(t, ok)
		require.Equal(t, slowDelivery, time.Since(start), "waited until its deliveries were slow")
		require.Positive(t, wait)
	})
	inBubble(t, func(t *testing.T, s *share) {
		fill(t, s, "http://new", 15)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, wait, ok := s.take(ctx, "http://new")
		require.False(t, ok, "a done context ends the wait")
		require.Zero(t, wait)
	})
}

// A message put off waits for its place in the destination's schedule:
// spaced by the destination's delivery time over its bound, at most
// maxWait.
func TestSharePutOffSchedule(t *testing.T) {
	inBubble(t, func(t *testing.T, s *share) {
		first := fill(t, s, "http://slow", 15)
		time.Sleep(3 * time.Second)
		_, wait, _ := take(t, s, "http://slow")
		step := 3 * time.Second / 15
		require.Equal(t, step, wait, "spaced by the age of its deliveries in flight, none ended yet")
		for _, tk := range first {
			tk.end(true) // each took 3 s
		}
		for range 15 {
			_, _, ok := take(t, s, "http://slow")
			require.True(t, ok)
		}
		var waits []time.Duration
		for range 3 {
			_, wait, ok := take(t, s, "http://slow")
			require.False(t, ok)
			waits = append(waits, wait)
		}
		assert.Equal(t, []time.Duration{2 * step, 3 * step, 4 * step}, waits, "after the place booked above")
		for range 1000 {
			_, wait, _ := take(t, s, "http://slow")
			require.LessOrEqual(t, wait, time.Minute, "at most maxWait")
		}
	})
}

// A delivery that its client refused to send says nothing of the
// destination's speed, nor does one cancelled before it started.
func TestShareIgnoresRefusals(t *testing.T) {
	inBubble(t, func(t *testing.T, s *share) {
		tk, _, _ := take(t, s, "http://down")
		time.Sleep(time.Millisecond)
		tk.end(false)
		tk, _, _ = take(t, s, "http://down")
		tk.cancel()
		assert.False(t, s.dests["http://down"].known, "still not known")
		assert.Empty(t, s.dests["http://down"].inflight)
	})
}

func TestDestinationOf(t *testing.T) {
	assert.Equal(t, "https://api.example.com:8443", destinationOf("HTTPS://API.example.com:8443/v1/x?y=1"))
	assert.Equal(t, "http://127.0.0.1:9", destinationOf("http://127.0.0.1:9/hook"))
	assert.NotEqual(t, destinationOf("http://a.example/x"), destinationOf("https://a.example/x"))
}
