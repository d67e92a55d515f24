package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/outbox"
)

// steadyCap bounds the payments in flight of a steady run: an offered
// rate that needs more is not sustained.
const steadyCap = 64

// steadySteps is how many bisections a steady search makes: the rate it
// finds is within hi/2^steadySteps of the highest sustained.
const steadySteps = 6

// benchSteady measures the payment rate that POST /v1/payments sustains
// with a dispatcher delivering at the same time: one Outbox.Run (the
// default Config, on a pool of its own) delivering to a loopback receiver
// that answers 201, in the same process as the API. A rate is sustained
// when every payment it offers, for -duration, is made (at most
// steadyCap in flight, none failed) and, with the outbox, the messages
// neither delivered nor parked at the end are fewer than a quarter of a
// second's: the backlog does not grow. The highest sustained rate is
// found by bisection between 0 and 1.1 times the closed-loop rate without
// the outbox (-concurrency in flight), a step that fails being tried once
// more, for the payments without the outbox and with one message each,
// in -rounds rounds.
func benchSteady(ctx context.Context, dbURL string, o options) error {
	pool, err := openPool(ctx, dbURL, steadyCap+8)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := api.Migrate(ctx, pool); err != nil {
		return err
	}
	if err := outbox.Migrate(ctx, pool); err != nil {
		return err
	}
	quiet := slog.New(slog.DiscardHandler)
	ob, err := outbox.New(pool, outbox.Config{Logger: quiet})
	if err != nil {
		return err
	}
	s := newSink(0) // counts arrivals; never "all"
	defer s.srv.Close()
	plain := httptest.NewServer(api.New(api.Config{Backend: api.NewPostgresBackend(pool), Logger: quiet}))
	defer plain.Close()
	notified := httptest.NewServer(api.New(api.Config{Backend: api.NewPostgresBackend(pool).NotifyTo(ob, s.srv.URL), Logger: quiet}))
	defer notified.Close()
	if err := createAccounts(ctx, plain.URL); err != nil {
		return err
	}
	stop, err := dispatcher(ctx, dbURL, o.cooldown)
	if err != nil {
		return err
	}
	defer stop()
	top, err := payments(ctx, plain.URL, or(o.n, 4000), o.concurrency)
	if err != nil {
		return err
	}
	fmt.Printf("steady payments with a dispatcher delivering; %s a step, at most %d in flight; closed-loop rate without the outbox: %.0f/s\n",
		o.seconds, steadyCap, top)
	var rates [2][]float64
	for r := range o.rounds {
		for i, srv := range []*httptest.Server{plain, notified} {
			q := ob
			if i == 0 {
				q = nil
			}
			rate, err := sustained(ctx, srv.URL, q, 1.1*top, o.seconds)
			if err != nil {
				return err
			}
			rates[i] = append(rates[i], rate)
			fmt.Printf("round %d %-20s sustained %6.0f payments/s\n", r+1, []string{"without outbox", "with 1 message each"}[i], rate)
		}
	}
	without, with := median(rates[0]), median(rates[1])
	fmt.Printf("median of %d rounds: without %.0f, with %.0f payments/s: with/without %.1f%%\n",
		o.rounds, without, with, 100*with/without)
	return nil
}

// dispatcher runs one Outbox on a pool of its own until stop is called.
func dispatcher(ctx context.Context, dbURL string, cooldown time.Duration) (stop func(), err error) {
	pool, err := openPool(ctx, dbURL, 12)
	if err != nil {
		return nil, err
	}
	ob, err := outbox.New(pool, outbox.Config{Logger: slog.New(slog.DiscardHandler), FetchCooldown: cooldown})
	if err != nil {
		pool.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = ob.Run(runCtx); pool.Close(); close(done) }()
	time.Sleep(time.Second) // it starts: leader election, LISTEN
	return func() { cancel(); <-done }, nil
}

// sustained bisects the rates in (0, hi) for the highest that payments at
// base sustain (see benchSteady); ob is the outbox whose backlog must not
// grow, nil without one.
func sustained(ctx context.Context, base string, ob *outbox.Outbox, hi float64, d time.Duration) (float64, error) {
	lo := 0.0
	for range steadySteps {
		rate := (lo + hi) / 2
		ok, err := step(ctx, base, ob, rate, d)
		if err == nil && !ok { // once more: on a shared machine a stall of another's fails a step
			ok, err = step(ctx, base, ob, rate, d)
		}
		if err != nil {
			return 0, err
		}
		if ok {
			lo = rate
		} else {
			hi = rate
		}
	}
	return lo, nil
}

// step reports whether payments at base sustain rate for d (see
// benchSteady), from an empty backlog.
func step(ctx context.Context, base string, ob *outbox.Outbox, rate float64, d time.Duration) (bool, error) {
	if err := drained(ctx, ob); err != nil {
		return false, err
	}
	ok, err := offer(ctx, base, rate, d)
	if err != nil || !ok || ob == nil {
		return ok, err
	}
	st, err := ob.Stats(ctx)
	return st.Pending < int(rate/4), err
}

// drained waits until ob has nothing pending (a step that was not
// sustained may leave a backlog), up to 5 minutes.
func drained(ctx context.Context, ob *outbox.Outbox) error {
	for deadline := time.Now().Add(5 * time.Minute); ob != nil; time.Sleep(100 * time.Millisecond) {
		st, err := ob.Stats(ctx)
		switch {
		case err != nil:
			return err
		case st.Pending == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%d messages still pending after 5 minutes", st.Pending)
		}
	}
	return nil
}

// offer makes payments at base at rate a second for d, and reports
// whether each was made in time: started on its tick with fewer than
// steadyCap in flight, and answered 201.
func offer(ctx context.Context, base string, rate float64, d time.Duration) (bool, error) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	var inFlight atomic.Int64
	var failed atomic.Value
	missed := false
	for end := time.Now().Add(d); time.Now().Before(end); {
		<-tick.C
		if inFlight.Load() >= steadyCap {
			missed = true
			continue
		}
		inFlight.Add(1)
		wg.Go(func() {
			defer inFlight.Add(-1)
			body := fmt.Sprintf(`{"account_id":"acc-%d","amount_cents":1,"currency":"EUR"}`, time.Now().UnixNano()%benchAccounts)
			status, err := call(ctx, "POST", base+"/v1/payments", body, uuid.NewString())
			if err == nil && status != http.StatusCreated {
				err = fmt.Errorf("status %d", status)
			}
			if err != nil {
				failed.Store(err)
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return false, err
	}
	return !missed, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
