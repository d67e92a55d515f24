package idem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hedging tests run on synctest's fake clock: time moves only when
// every goroutine of the test waits, so delays are exact and nothing sleeps.

// scripted is a base transport whose n-th call (from 1) waits latency(n),
// or until its request's context ends, and then answers status(n). It
// records each call's start and how it ended.
type scripted struct {
	latency func(n int) time.Duration
	status  func(n int) int

	calls atomic.Int32
	mu    sync.Mutex
	start []time.Time
	ended []error // nil: answered; else the context's error
}

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	n := int(s.calls.Add(1))
	s.mu.Lock()
	s.start = append(s.start, time.Now())
	s.mu.Unlock()
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	timer := time.NewTimer(s.latency(n))
	defer timer.Stop()
	select {
	case <-r.Context().Done():
		s.record(r.Context().Err())
		return nil, r.Context().Err()
	case <-timer.C:
	}
	s.record(nil)
	status := http.StatusOK
	if s.status != nil {
		status = s.status(n)
	}
	body := "reply " + string(rune('0'+n))
	return &http.Response{StatusCode: status, Request: r, Header: http.Header{},
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}, nil
}

func (s *scripted) record(err error) {
	s.mu.Lock()
	s.ended = append(s.ended, err)
	s.mu.Unlock()
}

func (s *scripted) report() (starts []time.Time, ended []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.start...), append([]error(nil), s.ended...)
}

// secondIs: the second call answers status, the others otherwise.
func secondIs(status, otherwise int) func(int) int {
	return func(n int) int {
		if n == 2 {
			return status
		}
		return otherwise
	}
}

// slowFirst: the first call takes d, the others answer at once.
func slowFirst(d time.Duration) func(int) time.Duration {
	return func(n int) time.Duration {
		if n == 1 {
			return d
		}
		return 0
	}
}

// A GET whose attempt is slow gets a hedge after the delay; the hedge's
// response wins, the slow attempt is cancelled and not counted against
// the host's breaker.
func TestHedgeLoserCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: slowFirst(time.Hour)}
		var seen []Attempt
		tr := NewTransport(Config{Base: base, Hedge: HedgeConfig{Delay: 10 * time.Millisecond},
			Observer: Observer{OnAttempt: func(a Attempt) { seen = append(seen, a) }}})
		start := time.Now()
		resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
		require.NoError(t, err)
		assert.Equal(t, 10*time.Millisecond, time.Since(start), "the hedge's answer, at once")
		assert.Equal(t, "reply 2", readAll(t, resp))
		synctest.Wait()

		starts, ended := base.report()
		require.Len(t, starts, 2)
		assert.Equal(t, 10*time.Millisecond, starts[1].Sub(starts[0]), "the hedge after the delay")
		assert.Equal(t, []error{nil, context.Canceled}, ended, "the loser is cancelled")
		require.Len(t, seen, 1, "the winner is reported")
		assert.True(t, seen[0].Hedge)
		counts := tr.breakers.get("http://api.test:80").Counts()
		assert.EqualValues(t, 0, counts.TotalFailures, "a cancelled loser is no failure of the host")
	})
}

// Every hook tells an attempt by the same Number: the winning hedge is the
// call's second request on the wire in OnSend, in its done and in
// OnAttempt (which counted it as the first to complete), and the loser,
// cancelled, is the first in OnSend and done.
func TestHedgeNumbersAgreeAcrossHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: slowFirst(time.Hour)}
		var mu sync.Mutex
		var sends, dones, attempts []Attempt
		tr := NewTransport(Config{Base: base, Hedge: HedgeConfig{Delay: 10 * time.Millisecond},
			Observer: Observer{
				OnSend: func(ctx context.Context, a Attempt) (context.Context, func(Attempt)) {
					mu.Lock()
					defer mu.Unlock()
					sends = append(sends, a)
					return ctx, func(a Attempt) { mu.Lock(); dones = append(dones, a); mu.Unlock() }
				},
				OnAttempt: func(a Attempt) { attempts = append(attempts, a) },
			}})
		resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
		require.NoError(t, err)
		assert.Equal(t, "reply 2", readAll(t, resp))
		synctest.Wait()

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, sends, 2)
		assert.Equal(t, []int{1, 2}, []int{sends[0].Number, sends[1].Number})
		assert.Equal(t, []bool{false, true}, []bool{sends[0].Hedge, sends[1].Hedge})
		require.Len(t, dones, 2)
		byHedge := map[bool]int{dones[0].Hedge: dones[0].Number, dones[1].Hedge: dones[1].Number}
		assert.Equal(t, map[bool]int{false: 1, true: 2}, byHedge, "done: the loser 1, the hedge 2")
		require.Len(t, attempts, 1)
		assert.True(t, attempts[0].Hedge)
		assert.Equal(t, 2, attempts[0].Number, "OnAttempt: the hedge is the call's second request")
	})
}

// A hedge spends a retry token: when the budget has none, no hedge is sent
// and the call waits for its attempt.
func TestHedgeBudgetDenialStopsHedging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: slowFirst(50 * time.Millisecond)}
		budget := NewBudget(BudgetConfig{FloorRate: -1}) // a call earns 0.1 of a retry
		tr := NewTransport(Config{Base: base, Budget: budget,
			Hedge: HedgeConfig{Delay: 10 * time.Millisecond, MaxHedges: 3}})
		start := time.Now()
		resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
		require.NoError(t, err)
		discard(resp)
		assert.Equal(t, 50*time.Millisecond, time.Since(start))
		assert.EqualValues(t, 1, base.calls.Load(), "no hedge")
		assert.Equal(t, BudgetStats{Answered: 1, Denied: 1}, budget.Stats(), "one denial stops the hedging")
		assertHostIdle(t, tr)

		budget = NewBudget(BudgetConfig{FloorRate: 1, FloorBurst: 1})
		base = &scripted{latency: slowFirst(50 * time.Millisecond)}
		tr = NewTransport(Config{Base: base, Budget: budget, Hedge: HedgeConfig{Delay: 10 * time.Millisecond}})
		resp, err = tr.RoundTrip(mustGet(t, "http://api.test/item"))
		require.NoError(t, err)
		discard(resp)
		assert.EqualValues(t, 2, base.calls.Load(), "a hedge with a token")
		assert.EqualValues(t, 1, budget.Stats().Retries, "the hedge spent it")
	})
}

// When many attempts to a host are slow at once, the hedges in flight stay
// within InFlightShare of its attempts in flight: of four calls stalled
// together one is hedged by default, each with a share of 1; a hedge the
// bound denies spends no budget token, and the counts return to zero.
// (TestHedgeBoundDenialStopsHedging: a denied hedge is not tried again.)
func TestHedgeInFlightBound(t *testing.T) {
	for _, tt := range []struct {
		share  float64
		hedges int
	}{{0, 1}, {0.4, 2}, {1, 4}} {
		t.Run(fmt.Sprint(tt.share), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &scripted{latency: func(int) time.Duration { return 45 * time.Millisecond }}
				budget := NewBudget(BudgetConfig{FloorRate: 100, FloorBurst: 100})
				tr := NewTransport(Config{Base: base, Budget: budget,
					Hedge: HedgeConfig{Delay: 10 * time.Millisecond, InFlightShare: tt.share}})
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
						if assert.NoError(t, err) {
							discard(resp)
						}
					})
				}
				wg.Wait()
				synctest.Wait()
				assert.EqualValues(t, 4+tt.hedges, base.calls.Load())
				assert.EqualValues(t, tt.hedges, budget.Stats().Retries, "only the hedges sent spent a token")
				assert.Zero(t, budget.Stats().Denied)
				assertHostIdle(t, tr)
			})
		})
	}
}

// A hedge the in-flight bound denied is not tried again: two calls stall
// together, one is hedged at 10 ms and that hedge takes 15 ms; the
// other's hedge is denied at 10 ms, and the call waits for its attempt
// (50 ms) although the bound would allow a hedge after 25 ms.
func TestHedgeBoundDenialStopsHedging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := &scripted{latency: func(n int) time.Duration {
			switch n {
			case 1, 2:
				return 50 * time.Millisecond
			case 3:
				return 15 * time.Millisecond
			}
			return 0
		}}
		tr := NewTransport(Config{Base: base, NoBudget: true, Hedge: HedgeConfig{Delay: 10 * time.Millisecond}})
		var wg sync.WaitGroup
		var took [2]time.Duration
		for i := range 2 {
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
				if assert.NoError(t, err) {
					discard(resp)
				}
				took[i] = time.Since(start)
			})
		}
		wg.Wait()
		synctest.Wait()
		starts, _ := base.report()
		require.Len(t, starts, 3, "two attempts and one hedge")
		assert.Equal(t, 10*time.Millisecond, starts[2].Sub(start), "the hedge")
		assert.ElementsMatch(t, []time.Duration{25 * time.Millisecond, 50 * time.Millisecond}, took[:])
	})
}

// A hedge whose request cannot be built (its GetBody fails, or panics)
// gives back its place in the host's hedges in flight: the host can be
// hedged again.
func TestHedgeUnbuiltRequestReleasesItsPlace(t *testing.T) {
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprint("panics=", panics), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &scripted{latency: slowFirst(50 * time.Millisecond)}
				tr := NewTransport(Config{Base: base, NoBudget: true, Hedge: HedgeConfig{Delay: 10 * time.Millisecond}})
				req, err := http.NewRequest(http.MethodPut, "http://api.test/item", strings.NewReader("x"))
				require.NoError(t, err)
				req.GetBody = func() (io.ReadCloser, error) {
					if panics {
						panic("GetBody")
					}
					return nil, errors.New("GetBody")
				}
				func() {
					defer func() { recover() }()
					if resp, err := tr.RoundTrip(req); err == nil {
						discard(resp)
					}
				}()
				time.Sleep(time.Hour) // the first attempt ends
				synctest.Wait()
				assertHostIdle(t, tr)
				assert.EqualValues(t, 1, base.calls.Load(), "the hedge was never sent")
			})
		})
	}
}

// A panic of an attempt of a hedged call (the base transport's, here)
// goes on to the caller, as without hedging: the first attempt's (before
// any hedge), and a hedge's while the first attempt still runs, which is
// then cancelled. The host's counts return to zero.
func TestHedgePanicGoesToTheCaller(t *testing.T) {
	for _, panicking := range []int{1, 2} {
		t.Run(fmt.Sprint("attempt ", panicking), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				inner := &scripted{latency: func(int) time.Duration { return time.Hour }}
				var n atomic.Int32
				base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if int(n.Add(1)) == panicking {
						panic("base broke")
					}
					return inner.RoundTrip(r)
				})
				tr := NewTransport(Config{Base: base, NoBudget: true, Hedge: HedgeConfig{Delay: 10 * time.Millisecond}})
				assert.PanicsWithValue(t, "base broke", func() {
					tr.RoundTrip(mustGet(t, "http://api.test/item"))
				})
				synctest.Wait()
				_, ended := inner.report()
				if panicking == 1 {
					assert.Empty(t, ended, "no hedge was sent")
				} else {
					assert.Equal(t, []error{context.Canceled}, ended, "the first attempt is cancelled")
				}
				assertHostIdle(t, tr)
				assert.EqualValues(t, 1, tr.breakers.get("http://api.test:80").Counts().TotalFailures, "the panic counts as a failure")
			})
		})
	}
}

// A hedge whose base transport calls runtime.Goexit (a test's FailNow)
// ends the caller's goroutine the same way, as an unhedged attempt would,
// and the first attempt is cancelled.
func TestHedgeGoexitGoesToTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := &scripted{latency: func(int) time.Duration { return time.Hour }}
		var n atomic.Int32
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if n.Add(1) == 2 {
				runtime.Goexit()
			}
			return inner.RoundTrip(r)
		})
		tr := NewTransport(Config{Base: base, NoBudget: true, Hedge: HedgeConfig{Delay: 10 * time.Millisecond}})
		returned, exited := false, make(chan struct{})
		go func() {
			defer close(exited)
			if resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item")); err == nil {
				discard(resp)
			}
			returned = true
		}()
		<-exited
		assert.False(t, returned, "RoundTrip did not return: its goroutine exited")
		synctest.Wait()
		_, ended := inner.report()
		assert.Equal(t, []error{context.Canceled}, ended, "the first attempt is cancelled")
		assertHostIdle(t, tr)
	})
}

// A Classifier that panics on a hedge's response, while the first attempt
// still runs: the panic reaches the caller, the first attempt is
// cancelled, and the hedge's response is closed.
func TestHedgeClassifierPanicCancelsTheRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: slowFirst(time.Hour), status: func(n int) int { return 500 }}
		body := &closeCounter{Reader: strings.NewReader(strings.Repeat("x", 1<<20))} // the hedge's: the only response
		wrapped := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := base.RoundTrip(r)
			if resp != nil { // longer than any read-ahead: only a Close closes it
				resp.Body, resp.ContentLength = body, 1<<20
			}
			return resp, err
		})
		tr := NewTransport(Config{Base: wrapped, NoBudget: true, Hedge: HedgeConfig{Delay: 10 * time.Millisecond},
			Classifier: func(o Outcome) Decision {
				if o.Status == 500 {
					panic("classifier broke")
				}
				return Decision{}
			}})
		assert.PanicsWithValue(t, "classifier broke", func() {
			tr.RoundTrip(mustGet(t, "http://api.test/item"))
		})
		synctest.Wait()
		_, ended := base.report()
		assert.ElementsMatch(t, []error{nil, context.Canceled}, ended, "the hedge answered, the first attempt was cancelled")
		assert.EqualValues(t, 1, body.closes.Load(), "the hedge's response is closed")
		assertHostIdle(t, tr)
	})
}

// A hedge that could not be sent (its breaker refused it, or its body
// failed) ends nothing while the first attempt is on the wire: a keyed
// POST's first attempt takes 50 ms, another call's 503 opens the host's
// breaker at 5 ms, the hedge is refused at 10 ms, and the call gets its
// first attempt's answer; no further hedge is tried. Ending the call at
// 10 ms would cancel an attempt that may have acted and report that none
// had.
func TestHedgeUnsentWaitsForTheAttemptOnTheWire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: slowFirst(50 * time.Millisecond), status: secondIs(http.StatusServiceUnavailable, http.StatusCreated)}
		tr := NewTransport(Config{Base: base, NoBudget: true, Breaker: BreakerConfig{ConsecutiveFailures: 1},
			Hedge: HedgeConfig{Delay: 10 * time.Millisecond, MaxHedges: 3, InFlightShare: 1}})
		other := make(chan struct{})
		go func() {
			defer close(other)
			time.Sleep(5 * time.Millisecond)
			req := mustGet(t, "http://api.test/other")
			if resp, err := tr.RoundTrip(req.WithContext(WithMaxAttempts(req.Context(), 1))); err == nil {
				discard(resp)
			}
		}()
		ctx := WithHedging(WithKey(context.Background(), "pay-1"))
		start := time.Now()
		resp, err := tr.RoundTrip(post(t, ctx, "http://api.test/pay", `{}`))
		require.NoError(t, err, "the first attempt's response")
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Equal(t, "reply 1", readAll(t, resp))
		assert.Equal(t, 50*time.Millisecond, time.Since(start))
		assert.EqualValues(t, 2, base.calls.Load(), "the call's attempt and the other call's; no hedge")
		<-other
	})
}

// When a hedge's outcome fails the call while the first attempt is on the
// wire, the first is cancelled there and may have taken effect: the error
// says so.
func TestHedgeFailWhileAnAttemptRunsMayHaveActed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: slowFirst(time.Hour), status: func(int) int { return http.StatusBadRequest }}
		tr := NewTransport(Config{Base: base, NoBudget: true, Hedge: HedgeConfig{Delay: 10 * time.Millisecond},
			Classifier: func(o Outcome) Decision {
				return Decision{Verdict: Fail, Err: ErrKeyReused}
			}})
		ctx := WithHedging(WithKey(context.Background(), "pay-2"))
		_, err := tr.RoundTrip(post(t, ctx, "http://api.test/pay", `{}`))
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.ErrorIs(t, err, ErrKeyReused)
		assert.True(t, e.MayHaveTakenEffect, "the first attempt was cancelled on the wire")
		assert.Equal(t, 2, e.Attempts)
		synctest.Wait()
	})
}

// Without hedging too, a Classifier that panics leaves no response open.
func TestClassifierPanicClosesTheResponse(t *testing.T) {
	body := &closeCounter{Reader: strings.NewReader(strings.Repeat("x", 1<<20))}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 500, Request: r, Header: http.Header{}, ContentLength: 1 << 20, Body: body}, nil
	})
	tr := NewTransport(Config{Base: base, NoBudget: true,
		Classifier: func(Outcome) Decision { panic("classifier broke") }})
	assert.PanicsWithValue(t, "classifier broke", func() { tr.RoundTrip(mustGet(t, "http://api.test/item")) })
	assert.EqualValues(t, 1, body.closes.Load())
}

// Hedging is off by default: a GET that takes an hour is not hedged.
func TestHedgeOffByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: slowFirst(time.Hour)}
		tr := NewTransport(Config{Base: base, NoBudget: true})
		resp, err := tr.RoundTrip(mustGet(t, "http://api.test/item"))
		require.NoError(t, err)
		discard(resp)
		assert.EqualValues(t, 1, base.calls.Load())
		assert.Nil(t, tr.hedge)
	})
}

// A call marked critical hedges although the budget has nothing left, and
// spends from it (WithCritical).
func TestHedgeCriticalIgnoresTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: slowFirst(time.Hour)}
		budget := NewBudget(BudgetConfig{FloorRate: -1})
		tr := NewTransport(Config{Base: base, Budget: budget, Hedge: HedgeConfig{Delay: 10 * time.Millisecond}})
		req := mustGet(t, "http://api.test/item")
		resp, err := tr.RoundTrip(req.WithContext(WithCritical(req.Context())))
		require.NoError(t, err)
		discard(resp)
		synctest.Wait()
		assert.EqualValues(t, 2, base.calls.Load(), "the hedge was sent")
		assert.Zero(t, budget.Stats().Denied)
		assert.EqualValues(t, 1, budget.Stats().Retries, "and spent from the budget")
	})
}

// Only requests that are safe to send twice at once are hedged: idempotent
// methods, and keyed requests that opt in; never an unkeyed POST.
func TestHedgeOnlySafeRequests(t *testing.T) {
	for _, tt := range []struct {
		name   string
		method string
		ctx    context.Context
		calls  int32
	}{
		{"GET", http.MethodGet, context.Background(), 2},
		{"PUT", http.MethodPut, context.Background(), 2},
		{"unkeyed POST", http.MethodPost, WithHedging(WithoutKey(context.Background())), 1},
		{"keyed POST", http.MethodPost, context.Background(), 1},
		{"keyed POST opted in", http.MethodPost, WithHedging(context.Background()), 2},
		{"GET without retries", http.MethodGet, WithoutRetry(context.Background()), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &scripted{latency: slowFirst(50 * time.Millisecond)}
				tr := NewTransport(Config{Base: base, NoBudget: true, Hedge: HedgeConfig{Delay: 10 * time.Millisecond}})
				req, err := http.NewRequestWithContext(tt.ctx, tt.method, "http://api.test/x", strings.NewReader("{}"))
				require.NoError(t, err)
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				discard(resp)
				synctest.Wait()
				assert.Equal(t, tt.calls, base.calls.Load())
			})
		})
	}
}

// Hedges count toward MaxAttempts.
func TestHedgeCountsTowardMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: func(int) time.Duration { return 50 * time.Millisecond }}
		tr := NewTransport(Config{Base: base, NoBudget: true, MaxAttempts: 3,
			Hedge: HedgeConfig{Delay: 10 * time.Millisecond, MaxHedges: 5}})
		resp, err := tr.RoundTrip(mustGet(t, "http://api.test/x"))
		require.NoError(t, err)
		discard(resp)
		synctest.Wait()
		starts, _ := base.report()
		require.Len(t, starts, 3, "the attempt and two hedges")
		assert.Equal(t, 20*time.Millisecond, starts[2].Sub(starts[0]), "one hedge per delay")
	})
}

// A response that asks for a retry while another attempt runs is dropped:
// the call takes the other's.
func TestHedgeRetryOutcomeWaitsForTheOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: slowFirst(50 * time.Millisecond), status: secondIs(http.StatusServiceUnavailable, http.StatusOK)}
		tr := NewTransport(Config{Base: base, NoBudget: true, Hedge: HedgeConfig{Delay: 10 * time.Millisecond}})
		start := time.Now()
		resp, err := tr.RoundTrip(mustGet(t, "http://api.test/x"))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "reply 1", readAll(t, resp))
		assert.Equal(t, 50*time.Millisecond, time.Since(start))
		assert.EqualValues(t, 2, base.calls.Load())
	})
}

// With Percentile, the delay is that quantile of the host's recent
// latencies, once it has MinSamples of them; before, no hedge (Delay 0).
func TestHedgePercentileDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: func(n int) time.Duration {
			switch {
			case n <= 10:
				return time.Duration(n) * time.Millisecond // 1 ms ... 10 ms
			case n == 11:
				return time.Hour
			}
			return 0
		}}
		tr := NewTransport(Config{Base: base, NoBudget: true,
			Hedge: HedgeConfig{Percentile: 0.9, Window: 10, MinSamples: 10}})
		for range 10 {
			resp, err := tr.RoundTrip(mustGet(t, "http://api.test/x"))
			require.NoError(t, err)
			discard(resp)
		}
		require.EqualValues(t, 10, base.calls.Load(), "no hedge before MinSamples")
		start := time.Now()
		resp, err := tr.RoundTrip(mustGet(t, "http://API.test:80/y"))
		require.NoError(t, err)
		discard(resp)
		assert.Equal(t, 9*time.Millisecond, time.Since(start), "p90 of 1..10 ms, nearest rank")
		assert.EqualValues(t, 12, base.calls.Load())
		synctest.Wait()
	})
}

// An attempt that lost its race counts, at the time it was cancelled, in
// the host's latencies: it took at least that long.
func TestHedgeLoserLatencyRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{latency: func(n int) time.Duration {
			if n == 1 {
				return time.Hour
			}
			return 3 * time.Millisecond
		}}
		tr := NewTransport(Config{Base: base, NoBudget: true,
			Hedge: HedgeConfig{Delay: 10 * time.Millisecond, Percentile: 0.5, Window: 4, MinSamples: 4}})
		resp, err := tr.RoundTrip(mustGet(t, "http://api.test/x"))
		require.NoError(t, err)
		discard(resp)
		synctest.Wait()
		l := tr.hedge.hosts.lookup(mustURL(t, "http://api.test/")).latencies
		l.mu.Lock()
		defer l.mu.Unlock()
		assert.Equal(t, 2, l.added)
		assert.ElementsMatch(t, []time.Duration{3 * time.Millisecond, 13 * time.Millisecond}, l.ring[:2],
			"the hedge's 3 ms, and the loser's 13 ms until it was cancelled")
	})
}

// assertHostIdle checks that api.test has no attempt nor hedge in flight
// left: every count taken was given back.
func assertHostIdle(t *testing.T, tr *Transport) {
	t.Helper()
	host := tr.hedge.hosts.lookup(mustURL(t, "http://api.test/"))
	assert.Zero(t, host.attempts.Load(), "attempts in flight")
	assert.Zero(t, host.hedges.Load(), "hedges in flight")
}
