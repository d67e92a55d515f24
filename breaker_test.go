package idem

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Acceptance 3 (issue 3), on a real server: once the breaker trips, requests
// stop reaching the server and fail-fast calls fail at once with
// ErrCircuitOpen.
func TestBreakerStopsRequestsToFailingHost(t *testing.T) {
	a := &api{before: func(n int, w http.ResponseWriter) bool { w.WriteHeader(http.StatusServiceUnavailable); return true }}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{MaxAttempts: 1, NoBudget: true, FailFast: true})
	var changes []string
	tr.cfg.Observer.OnBreakerChange = func(host string, from, to BreakerState) {
		changes = append(changes, fmt.Sprintf("%s %s->%s", host, from, to))
	}

	for i := range defaultBreakerConsecutiveFailures {
		resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
		require.NoError(t, err, "call %d reaches the server", i)
		discard(resp)
	}
	require.EqualValues(t, defaultBreakerConsecutiveFailures, a.requests.Load())
	assert.Equal(t, []string{hostKey(mustURL(t, srv.URL)) + " closed->open"}, changes)

	var refused []Attempt // an observer sees the caller's request: none was built
	tr.cfg.Observer.OnGiveUp = func(a Attempt, _ error) { refused = append(refused, a) }
	for range 20 {
		_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
		require.ErrorIs(t, err, ErrCircuitOpen)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, NotSent, e.Certainty)
		assert.Zero(t, e.Attempts)
		assert.Zero(t, e.Waited)
		assert.Contains(t, e.Detail, "fail-fast")
	}
	assert.EqualValues(t, defaultBreakerConsecutiveFailures, a.requests.Load(), "no request reaches the server while open")
	require.Len(t, refused, 20)
	for _, at := range refused {
		require.NotNil(t, at.Request)
		assert.Equal(t, mustURL(t, srv.URL).Host, at.Request.URL.Host)
	}
}

// fakeHost is a base RoundTripper that plays a server in memory, for tests
// that run on synctest's fake clock (gobreaker reads time.Now).
type fakeHost struct {
	status   atomic.Int32
	requests atomic.Int32
}

func (f *fakeHost) RoundTrip(r *http.Request) (*http.Response, error) {
	f.requests.Add(1)
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: int(f.status.Load()), Body: http.NoBody, Request: r, ContentLength: 0}, nil
}

// Acceptance 3 (issue 3), on synctest's clock: the open breaker lets a
// probe through after its open period (1 s the first time, doubled at each
// reopening); a probe that succeeds closes it, one that fails opens it
// again.
func TestBreakerHalfOpenProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := &fakeHost{}
		host.status.Store(503)
		var mu sync.Mutex
		var changes []string
		tr := NewTransport(Config{Base: host, MaxAttempts: 1, NoBudget: true, FailFast: true, Observer: Observer{
			OnBreakerChange: func(_ string, from, to BreakerState) {
				mu.Lock()
				defer mu.Unlock()
				changes = append(changes, from.String()+"->"+to.String())
			},
		}})
		call := func() error {
			resp, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/pay", `{}`))
			if err == nil {
				discard(resp)
			}
			return err
		}
		for range defaultBreakerConsecutiveFailures {
			require.NoError(t, call())
		}
		require.ErrorIs(t, call(), ErrCircuitOpen)
		require.EqualValues(t, defaultBreakerConsecutiveFailures, host.requests.Load())

		// Still open just before the first period, 1 s.
		time.Sleep(time.Second - time.Millisecond)
		require.ErrorIs(t, call(), ErrCircuitOpen)

		// Half-open once past it: a failing probe opens it again, for 2 s.
		time.Sleep(time.Millisecond)
		require.NoError(t, call())
		require.ErrorIs(t, call(), ErrCircuitOpen)
		require.EqualValues(t, defaultBreakerConsecutiveFailures+1, host.requests.Load())
		time.Sleep(2*time.Second - time.Millisecond)
		require.ErrorIs(t, call(), ErrCircuitOpen, "the second period is twice the first")

		// The host recovers; after the period the probe closes it.
		host.status.Store(200)
		time.Sleep(time.Millisecond)
		for range defaultBreakerProbes {
			require.NoError(t, call())
		}
		for range 10 {
			require.NoError(t, call(), "closed again")
		}
		assert.EqualValues(t, defaultBreakerConsecutiveFailures+1+defaultBreakerProbes+10, host.requests.Load())
		assert.Equal(t, []string{"closed->open", "open->half-open", "half-open->open", "open->half-open", "half-open->closed"}, changes)
	})
}

// The failure ratio over the window trips the breaker too: four failures
// in five over MinRequests attempts, never fewer, and never a host that
// fails three in five.
func TestBreakerTripsOnFailureRatio(t *testing.T) {
	for _, tt := range []struct {
		name     string
		failures int // of every 5 attempts
		trips    bool
	}{
		{"four in five", 4, true},
		{"three in five", 3, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				host := &fakeHost{}
				tr := NewTransport(Config{Base: host, MaxAttempts: 1, NoBudget: true, FailFast: true})
				sent := 0
				for i := range 1000 {
					status := http.StatusOK
					if i%5 < tt.failures {
						status = http.StatusBadGateway
					}
					host.status.Store(int32(status))
					resp, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/pay", `{}`))
					if err != nil {
						require.ErrorIs(t, err, ErrCircuitOpen)
						break
					}
					discard(resp)
					sent++
					time.Sleep(time.Millisecond) // 1,000 attempts fit in the window
				}
				if tt.trips {
					assert.Equal(t, int(defaultBreakerMinRequests)+1, sent, "tripped by the first failure past the 100th attempt")
				} else {
					assert.Equal(t, 1000, sent, "never tripped")
				}
			})
		})
	}
}

// Acceptance 4 (issue 3): 404s and 422s never open the breaker.
func TestBreakerIgnoresClientErrors(t *testing.T) {
	for _, code := range []int{404, 422, 429, 400, 409} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			a := &api{before: func(n int, w http.ResponseWriter) bool {
				if code == 429 {
					w.Header().Set("Retry-After", "0")
				}
				w.WriteHeader(code)
				return true
			}}
			srv := a.start(t)
			tr, _ := newTestTransport(t, Config{MaxAttempts: 1, NoBudget: true})
			for range 30 {
				resp, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
				require.NoError(t, err)
				discard(resp)
			}
			assert.EqualValues(t, 30, a.requests.Load())
			cb := tr.breakers.get(hostKey(mustURL(t, srv.URL)))
			assert.Equal(t, BreakerClosed, cb.State())
			assert.Zero(t, cb.Counts().TotalFailures)
		})
	}
}

// Acceptance 4 (issue 3): the caller's cancelled context never counts as a
// failure.
func TestBreakerIgnoresCallerCancel(t *testing.T) {
	type cancelKey struct{}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r.Context().Value(cancelKey{}).(context.CancelFunc)() // the caller gives up mid-attempt
		return nil, r.Context().Err()
	})
	tr, _ := newTestTransport(t, Config{Base: base, NoBudget: true})
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		req := post(t, context.WithValue(ctx, cancelKey{}, cancel), "http://api.test/pay", `{}`)
		_, err := tr.RoundTrip(req)
		require.ErrorIs(t, err, context.Canceled)
	}
	cb := tr.breakers.get("http://api.test:80")
	assert.Equal(t, BreakerClosed, cb.State())
	assert.Zero(t, cb.Counts().TotalFailures)
	assert.EqualValues(t, 20, cb.Counts().TotalExclusions)
}

// Attempt timeouts and transport errors are failures.
func TestBreakerCountsTransportFailures(t *testing.T) {
	a := &api{fault: func(n int, w http.ResponseWriter) bool { return dropRST(w) }}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{MaxAttempts: 1, NoBudget: true, FailFast: true})
	for range defaultBreakerConsecutiveFailures {
		_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
		require.ErrorIs(t, err, ErrOutcomeUnknown)
	}
	_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	assert.ErrorIs(t, err, ErrCircuitOpen)
}

// Acceptance 5 (issue 3): 10,000 distinct hosts never hold more breakers
// than the bound; the most recently used are kept.
func TestBreakerRegistryBounded(t *testing.T) {
	host := &fakeHost{}
	host.status.Store(200)
	tr := NewTransport(Config{Base: host, NoBudget: true, Breaker: BreakerConfig{MaxHosts: 100}})
	for i := range 10000 {
		resp, err := tr.RoundTrip(mustGet(t, fmt.Sprintf("https://host-%d.test/", i)))
		require.NoError(t, err)
		discard(resp)
		require.LessOrEqual(t, tr.breakers.len(), 100)
	}
	assert.Equal(t, 100, tr.breakers.len())
	assert.Contains(t, tr.breakers.byHost, "https://host-9999.test:443")
	assert.NotContains(t, tr.breakers.byHost, "https://host-9899.test:443")

	def := NewTransport(Config{Base: host, NoBudget: true})
	for i := range 10000 {
		resp, err := def.RoundTrip(mustGet(t, fmt.Sprintf("http://h%d.test:8080/", i)))
		require.NoError(t, err)
		discard(resp)
	}
	assert.Equal(t, defaultBreakerMaxHosts, def.breakers.len())
}

// A hit makes a host the most recently used: the registry drops the least
// recently used, not the oldest.
func TestBreakerRegistryDropsLeastRecentlyUsed(t *testing.T) {
	r := newBreakers(BreakerConfig{MaxHosts: 3}, time.Second, time.Now, nil)
	a := r.get("http://a.test:80")
	r.get("http://b.test:80")
	r.get("http://c.test:80")
	var buf [64]byte
	assert.Same(t, a, r.lookup(appendHostKey(buf[:0], mustURL(t, "http://A.test/x"))), "a hit, by another spelling")
	r.get("http://d.test:80") // drops b, the least recently used
	assert.Equal(t, 3, r.len())
	assert.Contains(t, r.byHost, "http://a.test:80")
	assert.NotContains(t, r.byHost, "http://b.test:80")
	assert.Same(t, a, r.get("http://a.test:80"), "a kept its breaker")
}

func TestHostKey(t *testing.T) {
	tests := map[string]string{
		"http://API.example.com/x":                        "http://api.example.com:80",
		"https://api.example.com/x":                       "https://api.example.com:443",
		"https://api.example.com:8443":                    "https://api.example.com:8443",
		"http://[::1]:9000/":                              "http://[::1]:9000",
		"http://user:pw@h.test/?q=1":                      "http://h.test:80",
		"HTTPS://API.Example.COM/x":                       "https://api.example.com:443",
		"http://[FE80::1]:9000/":                          "http://[fe80::1]:9000",
		"http://ÄPI.test/":                                "http://äpi.test:80",
		"http://" + strings.Repeat("Long", 20) + ".test/": "http://" + strings.Repeat("long", 20) + ".test:80",
	}
	for raw, want := range tests {
		if got := hostKey(mustURL(t, raw)); got != want {
			t.Errorf("hostKey(%s) = %s, want %s", raw, got, want)
		}
	}
	// A hand-built URL with an upper-case scheme gets the default port of
	// its lower-case form.
	if got := hostKey(&url.URL{Scheme: "HTTPS", Host: "h.test"}); got != "https://h.test:443" {
		t.Errorf("hostKey(HTTPS://h.test) = %s, want https://h.test:443", got)
	}
}

// The spellings of one host share its breaker.
func TestBreakerSharedAcrossSpellings(t *testing.T) {
	host := &fakeHost{}
	host.status.Store(200)
	tr := NewTransport(Config{Base: host, NoBudget: true})
	for _, raw := range []string{"http://API.test/a", "http://api.test:80/b", "HTTP://api.TEST/c"} {
		resp, err := tr.RoundTrip(mustGet(t, raw))
		require.NoError(t, err)
		discard(resp)
	}
	assert.Equal(t, 1, tr.breakers.len())
	assert.EqualValues(t, 3, tr.breakers.get("http://api.test:80").Counts().TotalSuccesses)
}

// A base transport that panics fails the attempt in the breaker's counts,
// and the panic goes on to the caller.
func TestBreakerCountsPanicAsFailure(t *testing.T) {
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) { panic("base broke") })
	tr := NewTransport(Config{Base: base, NoBudget: true})
	assert.PanicsWithValue(t, "base broke", func() {
		tr.RoundTrip(mustGet(t, "http://api.test/"))
	})
	assert.EqualValues(t, 1, tr.breakers.get("http://api.test:80").Counts().TotalFailures)
}

// The stack's order: the key is attached before the retry loop, every
// attempt passes the breaker, a retry denied by the budget never reaches it.
func TestStackOrder(t *testing.T) {
	var keys []string
	var mu sync.Mutex
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		keys = append(keys, r.Header.Get(KeyHeader))
		mu.Unlock()
		io.Copy(io.Discard, r.Body)
		return &http.Response{StatusCode: 503, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	budget := newBudget(BudgetConfig{FloorRate: 1, FloorBurst: 2}, newFakeClock().now)
	tr, _ := newTestTransport(t, Config{Base: base, Budget: budget, MaxAttempts: 10, FailFast: true,
		Breaker: BreakerConfig{ConsecutiveFailures: 100}})
	_, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/pay", `{}`))
	require.ErrorIs(t, err, ErrBudgetExhausted)

	require.Len(t, keys, 3, "the first attempt and two budgeted retries")
	assert.NotEmpty(t, keys[0])
	assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys, "one key, attached above the retry loop")
	cb := tr.breakers.get("http://api.test:80")
	assert.EqualValues(t, 3, cb.Counts().Requests, "the breaker saw each attempt, and not the denied retry")
	assert.EqualValues(t, 3, cb.Counts().TotalFailures)
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}

// get returns the breaker of host (a key as appendHostKey makes it),
// creating it when needed.
func (r *breakers) get(host string) *hostBreaker {
	return r.lookup([]byte(host))
}

// Counts returns gobreaker's counts of h.
func (h *hostBreaker) Counts() gobreaker.Counts { return h.cb.Counts() }

// State returns h's state as gobreaker last reported it.
func (h *hostBreaker) State() BreakerState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

// hostKey names the breaker of a URL, as the registry does.
func hostKey(u *url.URL) string {
	var buf [64]byte
	return string(appendHostKey(buf[:0], u))
}

// The Observer sees idem's BreakerState, which names gobreaker's states.
func TestBreakerStateNames(t *testing.T) {
	var names []string
	for _, s := range []BreakerState{BreakerClosed, BreakerHalfOpen, BreakerOpen, 7} {
		names = append(names, s.String())
	}
	assert.Equal(t, "closed half-open open BreakerState(7)", strings.Join(names, " "))
}
