package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// tenant owns the benchmark's accounts and keys.
const tenant = "bench"

// accounts is how many accounts the payment load spreads over, so that
// the clients rarely wait for one account's row lock.
const accounts = 16

func accountID(i int) string { return fmt.Sprintf("acct-%02d", i%accounts) }

// load makes payments (POST /v1/payments, a new key each) on workers
// goroutines until stopped, and counts the 201s.
type load struct {
	client   *http.Client
	url      string
	ok, fail atomic.Int64
	stopping chan struct{}
	wg       sync.WaitGroup
}

func startLoad(url string, workers int) *load {
	l := &load{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}},
		url: url, stopping: make(chan struct{})}
	for w := range workers {
		l.wg.Go(func() { l.work(w) })
	}
	return l
}

func (l *load) work(w int) {
	body := []byte(fmt.Sprintf(`{"account_id":%q,"amount_cents":1,"currency":"EUR"}`, accountID(w)))
	for {
		select {
		case <-l.stopping:
			return
		default:
		}
		if l.pay(body) {
			l.ok.Add(1)
		} else {
			l.fail.Add(1)
		}
	}
}

// pay makes one payment and reports whether it got its 201.
func (l *load) pay(body []byte) bool {
	req, err := http.NewRequest(http.MethodPost, l.url+"/v1/payments", bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+tenant+":client")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", uuid.NewString())
	resp, err := l.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusCreated
}

// rate measures the payments made per second over what runs during.
func (l *load) rate(during func() error) (perSecond float64, elapsed time.Duration, err error) {
	before, start := l.ok.Load(), time.Now()
	err = during()
	elapsed = time.Since(start)
	return float64(l.ok.Load()-before) / elapsed.Seconds(), elapsed, err
}

// stop ends the load and waits for the payments in flight.
func (l *load) stop() {
	close(l.stopping)
	l.wg.Wait()
	l.client.CloseIdleConnections()
}
