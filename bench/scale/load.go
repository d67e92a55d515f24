package main

import (
	"cmp"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// request is one request's start and latency.
type request struct {
	start time.Time
	took  time.Duration
}

// tally is what turns of one variant measured.
type tally struct {
	wall     time.Duration
	requests []request
}

func (t *tally) add(o tally) {
	t.wall += o.wall
	t.requests = append(t.requests, o.requests...)
}

// rate is the requests per second of the turns.
func (t tally) rate() float64 {
	if t.wall <= 0 {
		return 0
	}
	return float64(len(t.requests)) / t.wall.Seconds()
}

// latencies is the sorted latencies of the requests that keep says.
func (t tally) latencies(keep func(request) bool) []time.Duration {
	var out []time.Duration
	for _, r := range t.requests {
		if keep == nil || keep(r) {
			out = append(out, r.took)
		}
	}
	slices.Sort(out)
	return out
}

// pct is the p-quantile of sorted latencies in milliseconds, 0 when there
// are none.
func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[int(p*float64(len(sorted)-1))].Microseconds()) / 1000
}

// endpoint posts payments to the API at url.
type endpoint struct {
	client *http.Client
	url    string
	next   atomic.Int64 // spreads the payments over the accounts
}

func newEndpoint(url string, conns int) *endpoint {
	return &endpoint{url: url, client: &http.Client{Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns}}}
}

// key makes the Idempotency-Key of a request: "" for none.
type key func() string

func noKey() string  { return "" }
func newKey() string { return uuid.NewString() }

// turn posts n payments from workers goroutines and measures them; every
// one must be answered 201.
func (e *endpoint) turn(ctx context.Context, n, workers int, k key) (tally, error) {
	var next atomic.Int64
	var mu sync.Mutex
	var t tally
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			var mine []request
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				t0 := time.Now()
				status, err := e.post(ctx, k())
				if err == nil && status != http.StatusCreated {
					err = fmt.Errorf("status %d", status)
				}
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					break
				}
				mine = append(mine, request{t0, time.Since(t0)})
			}
			mu.Lock()
			t.requests = append(t.requests, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	t.wall = time.Since(start)
	return t, cmp.Or(firstErr, ctx.Err())
}

// post makes one payment with key ("" for none) and returns its status.
// Requests with one key have one body, so that they are retries.
func (e *endpoint) post(ctx context.Context, key string) (int, error) {
	i := e.next.Add(1)
	if key != "" {
		i = int64(crc32.ChecksumIEEE([]byte(key)))
	}
	body := fmt.Sprintf(`{"account_id":"acct-%d","amount_cents":%d,"currency":"EUR","reference":"order-%d"}`,
		i%accounts, 1+i%97, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/v1/payments", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tenant+":client")
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// interleaved runs turns of chunk requests, plain (no key) and idem (a
// new key each), in the order plain, idem, idem, plain, ... so that a
// drift of the machine's load falls on both alike, until d has passed and
// a round of four turns is complete. each, when set, is called after
// every round with that round's figures.
func (e *endpoint) interleaved(ctx context.Context, d time.Duration, chunk, workers int,
	each func(plain, idem tally)) (plain, idem tally, err error) {
	start := time.Now()
	var round [2]tally
	for turn := 0; ; turn++ {
		v := (turn + turn/2) % 2 // 0 plain, 1 idem
		k := noKey
		if v == 1 {
			k = newKey
		}
		t, err := e.turn(ctx, chunk, workers, k)
		if err != nil {
			return plain, idem, err
		}
		round[v].add(t)
		if turn%4 == 3 {
			plain.add(round[0])
			idem.add(round[1])
			if each != nil {
				each(round[0], round[1])
			}
			round = [2]tally{}
			if time.Since(start) >= d {
				return plain, idem, nil
			}
		}
	}
}
